package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// FDBox passes file descriptors between the ranks of a job on one host (the
// VMM windows' memory, exported as POSIX file descriptors): a Unix datagram
// socket in the abstract namespace, named after the job and the rank, so
// there is no file to clean up and it goes away with the process. Each
// message carries one descriptor (SCM_RIGHTS), the sender's rank and a tag
// saying what it is for; a descriptor that arrives before it is asked for is
// held until then.
type FDBox struct {
	job  string
	rank int
	fd   int

	mu     sync.Mutex
	held   map[fdKey]int
	closed bool
}

type fdKey struct {
	from int
	tag  uint64
}

const fdMsgLen = 16 // sender's rank, then tag (little endian)

// fdBoxName is the abstract socket name of rank's box in job ("@": the
// abstract namespace).
func fdBoxName(job string, rank int) string { return fmt.Sprintf("@luacoll-%s-fd-%d", job, rank) }

// OpenFDBox opens rank's box of job.
func OpenFDBox(job string, rank int) (*FDBox, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("descriptor box of rank %d: socket: %w", rank, err)
	}
	name := fdBoxName(job, rank)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("descriptor box of rank %d: bind %s: %w", rank, name, err)
	}
	return &FDBox{job: job, rank: rank, fd: fd, held: map[fdKey]int{}}, nil
}

// Send passes a duplicate of fd to peer's box under tag; the caller keeps
// fd. It blocks while the peer's queue is full, so a rank that sends to
// several peers should receive at the same time (another goroutine).
func (b *FDBox) Send(peer int, tag uint64, fd int) error {
	var msg [fdMsgLen]byte
	binary.LittleEndian.PutUint64(msg[0:], uint64(b.rank))
	binary.LittleEndian.PutUint64(msg[8:], tag)
	to := &unix.SockaddrUnix{Name: fdBoxName(b.job, peer)}
	for {
		err := unix.Sendmsg(b.fd, msg[:], unix.UnixRights(fd), to, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("passing a descriptor to rank %d: %w", peer, err)
		}
		return nil
	}
}

// Recv returns the descriptor that rank from sent under tag, waiting until
// it arrives, ctx ends or timeout passes. The caller owns it.
func (b *FDBox) Recv(ctx context.Context, from int, tag uint64, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	k := fdKey{from, tag}
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return -1, errors.New("descriptor box closed")
		}
		if fd, ok := b.held[k]; ok {
			delete(b.held, k)
			b.mu.Unlock()
			return fd, nil
		}
		err := b.receive(50)
		b.mu.Unlock()
		if err != nil {
			return -1, err
		}
		if err := ctx.Err(); err != nil {
			return -1, fmt.Errorf("waiting for rank %d's descriptor: %w", from, err)
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("waiting for rank %d's descriptor: none came within %v", from, timeout)
		}
	}
}

// receive waits up to ms milliseconds for one message and holds its
// descriptor. Malformed messages are dropped (their descriptors closed).
func (b *FDBox) receive(ms int) error {
	pfd := []unix.PollFd{{Fd: int32(b.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, ms)
	if errors.Is(err, unix.EINTR) || n == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("descriptor box: poll: %w", err)
	}
	var msg [fdMsgLen + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	mn, oobn, _, _, err := unix.Recvmsg(b.fd, msg[:], oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("descriptor box: recvmsg: %w", err)
	}
	var fds []int
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if r, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, r...)
			}
		}
	}
	if mn != fdMsgLen || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil
	}
	k := fdKey{int(binary.LittleEndian.Uint64(msg[0:])), binary.LittleEndian.Uint64(msg[8:])}
	if old, ok := b.held[k]; ok {
		_ = unix.Close(old)
	}
	b.held[k] = fds[0]
	return nil
}

// Close closes the socket and every descriptor still held.
func (b *FDBox) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for k, fd := range b.held {
		_ = unix.Close(fd)
		delete(b.held, k)
	}
	return unix.Close(b.fd)
}
