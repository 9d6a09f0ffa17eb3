package bootstrap

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// outbox writes frames to a connection in order from its own goroutine, so
// that no caller ever blocks on a slow peer.
type outbox struct {
	conn    net.Conn
	timeout time.Duration // bound of one frame's write
	onErr   func(error)

	mu      sync.Mutex
	queue   []outItem
	closing bool // write what is queued, then stop
	dead    bool // stopped; sends are dropped
	wake    chan struct{}
	done    chan struct{} // closed when run returns
	// written counts the bytes written so far.
	written atomic.Int64
}

type outItem struct {
	frame   []byte
	flushed chan struct{} // a flush marker instead of a frame
}

func newOutbox(conn net.Conn, timeout time.Duration, onErr func(error)) *outbox {
	return &outbox{conn: conn, timeout: timeout, onErr: onErr,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// send queues a frame; it reports false when the outbox has stopped.
func (o *outbox) send(frame []byte) bool {
	o.mu.Lock()
	if o.dead || o.closing {
		o.mu.Unlock()
		return false
	}
	o.queue = append(o.queue, outItem{frame: frame})
	o.mu.Unlock()
	notify(o.wake)
	return true
}

// flush returns a channel closed once everything queued so far is written
// (or the outbox stopped).
func (o *outbox) flush() <-chan struct{} {
	ch := make(chan struct{})
	o.mu.Lock()
	if o.dead {
		o.mu.Unlock()
		close(ch)
		return ch
	}
	o.queue = append(o.queue, outItem{flushed: ch})
	o.mu.Unlock()
	notify(o.wake)
	return ch
}

// close makes run write what is queued and return.
func (o *outbox) close() {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	notify(o.wake)
}

// run is the writer goroutine.
func (o *outbox) run() {
	defer close(o.done)
	for {
		o.mu.Lock()
		for len(o.queue) == 0 {
			if o.closing {
				o.dead = true
				o.mu.Unlock()
				return
			}
			o.mu.Unlock()
			<-o.wake
			o.mu.Lock()
		}
		it := o.queue[0]
		o.queue[0] = outItem{}
		o.queue = o.queue[1:]
		o.mu.Unlock()
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		_ = o.conn.SetWriteDeadline(time.Now().Add(o.timeout))
		n, err := o.conn.Write(it.frame)
		o.written.Add(int64(n))
		if err != nil {
			o.mu.Lock()
			o.dead = true
			rest := o.queue
			o.queue = nil
			o.mu.Unlock()
			for _, r := range rest {
				if r.flushed != nil {
					close(r.flushed)
				}
			}
			if o.onErr != nil {
				o.onErr(err)
			}
			return
		}
	}
}
