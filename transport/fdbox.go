package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
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
// held until then. Only messages from processes of this user are taken
// (SO_PASSCRED), and the first one for a (rank, tag) is kept.
//
// Nothing here blocks without a bound: TrySend never waits, Pump waits a
// given time for one message. A rank that sends to several peers should
// keep pumping while its sends are refused for a full queue (see
// shareVMM), since its peers do the same.
type FDBox struct {
	job  string
	rank int
	fd   int
	uid  uint32

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
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("descriptor box of rank %d: SO_PASSCRED: %w", rank, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("descriptor box of rank %d: bind %s: %w", rank, name, err)
	}
	return &FDBox{job: job, rank: rank, fd: fd, uid: uint32(os.Getuid()), held: map[fdKey]int{}}, nil
}

// TrySend passes a duplicate of fd to peer's box under tag without
// waiting; the caller keeps fd. It reports false, with no error, when the
// peer's queue is full (try again after a Pump).
func (b *FDBox) TrySend(peer int, tag uint64, fd int) (bool, error) {
	var msg [fdMsgLen]byte
	binary.LittleEndian.PutUint64(msg[0:], uint64(b.rank))
	binary.LittleEndian.PutUint64(msg[8:], tag)
	to := &unix.SockaddrUnix{Name: fdBoxName(b.job, peer)}
	for {
		err := unix.Sendmsg(b.fd, msg[:], unix.UnixRights(fd), to, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("passing a descriptor to rank %d: %w", peer, err)
		}
		return true, nil
	}
}

// Take returns the descriptor that rank from sent under tag if it has
// arrived (Pump receives); the caller owns it.
func (b *FDBox) Take(from int, tag uint64) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := fdKey{from, tag}
	fd, ok := b.held[k]
	if ok {
		delete(b.held, k)
	}
	return fd, ok
}

// Recv returns the descriptor that rank from sent under tag, waiting until
// it arrives, ctx ends or timeout passes. The caller owns it.
func (b *FDBox) Recv(ctx context.Context, from int, tag uint64, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		if fd, ok := b.Take(from, tag); ok {
			return fd, nil
		}
		if err := b.Pump(50); err != nil {
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

// Pump waits up to ms milliseconds for a message and holds its descriptor,
// then holds whatever else is already queued. Malformed messages, and
// messages from processes of another user, are dropped (their descriptors
// closed).
func (b *FDBox) Pump(ms int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("descriptor box closed")
	}
	pfd := []unix.PollFd{{Fd: int32(b.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, ms)
	if errors.Is(err, unix.EINTR) || n == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("descriptor box: poll: %w", err)
	}
	for {
		got, err := b.receiveOne()
		if err != nil || !got {
			return err
		}
	}
}

// receiveOne takes one queued message without waiting; false when none.
func (b *FDBox) receiveOne() (bool, error) {
	var msg [fdMsgLen + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4)+unix.CmsgSpace(unix.SizeofUcred))
	mn, oobn, _, _, err := unix.Recvmsg(b.fd, msg[:], oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if errors.Is(err, unix.EAGAIN) {
		return false, nil
	}
	if errors.Is(err, unix.EINTR) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("descriptor box: recvmsg: %w", err)
	}
	var fds []int
	sameUser := false
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if r, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, r...)
			} else if cred, err := unix.ParseUnixCredentials(&cm); err == nil {
				sameUser = cred.Uid == b.uid
			}
		}
	}
	k := fdKey{int(binary.LittleEndian.Uint64(msg[0:])), binary.LittleEndian.Uint64(msg[8:])}
	_, dup := b.held[k]
	if mn != fdMsgLen || len(fds) != 1 || !sameUser || dup {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return true, nil
	}
	b.held[k] = fds[0]
	return true, nil
}

// Held is the number of descriptors taken in and not yet claimed or
// discarded.
func (b *FDBox) Held() int { return len(b.held) }

// Pass sends a duplicate of fd to every rank in peers under tag and hands
// each of those peers' descriptors under the same tag to use, closing it
// after. Sends never block: one refused for a full queue is tried again
// after taking in what arrived, since the peers do the same. After the
// first error (a send, a use, ctx's end, timeout), use is not called any
// more, but the loop still finishes its sends and takes in (and closes)
// what the peers pass, so no peer is left waiting on this rank; ctx's end
// and timeout end it at once. It returns the first error.
func (b *FDBox) Pass(ctx context.Context, peers []int, tag uint64, fd int, timeout time.Duration, use func(peer, fd int) error) error {
	deadline := time.Now().Add(timeout)
	toSend := append([]int(nil), peers...)
	waiting := map[int]bool{}
	for _, p := range peers {
		waiting[p] = true
	}
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	for {
		for len(toSend) > 0 {
			sent, err := b.TrySend(toSend[0], tag, fd)
			if err != nil {
				fail(err)
				sent = true // not to be tried again
			}
			if !sent {
				break
			}
			toSend = toSend[1:]
		}
		for p := range waiting {
			pfd, ok := b.Take(p, tag)
			if !ok {
				continue
			}
			delete(waiting, p)
			if first == nil {
				if err := use(p, pfd); err != nil {
					fail(err)
				}
			}
			_ = unix.Close(pfd)
		}
		if len(toSend) == 0 && len(waiting) == 0 {
			return first
		}
		if err := ctx.Err(); err != nil {
			fail(fmt.Errorf("passing window descriptors: %w", err))
			return first
		}
		if time.Now().After(deadline) {
			fail(fmt.Errorf("passing window descriptors: %d sends and %d peers' descriptors still missing after %v", len(toSend), len(waiting), timeout))
			return first
		}
		if err := b.Pump(1); err != nil {
			fail(err)
			return first
		}
	}
}

// Discard closes every held descriptor whose tag is at most tag, after
// taking in what is queued: what a failed or finished exchange left.
func (b *FDBox) Discard(tag uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for {
		if got, err := b.receiveOne(); err != nil || !got {
			break
		}
	}
	for k, fd := range b.held {
		if k.tag <= tag {
			_ = unix.Close(fd)
			delete(b.held, k)
		}
	}
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
