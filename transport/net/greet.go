package net

import (
	"fmt"
	"time"
)

// Greet implements transport.Greeter: it asks every peer connected since
// the last greeting to acknowledge a message, and returns once each has
// (every endpoint then wired up both ways), when cancel returns an error,
// or after timeout naming a peer that did not answer. A peer whose
// endpoint is still wiring up when the other side closes its network can
// abort inside UCX's TCP transport; greeted endpoints never are.
func (t *Transport) Greet(cancel func() error, timeout time.Duration) error {
	t.mu.Lock()
	if t.worker == nil || t.am == nil {
		t.mu.Unlock()
		return nil
	}
	var fw flushWork
	var asked []int
	var err error
	for peer, e := range t.eps {
		if e == nil || e.h == nil || t.greeted[peer] {
			continue
		}
		if err = t.askAckLocked(e); err != nil {
			break
		}
		fw.asked = append(fw.asked, flushReq{peer: peer, read: t.amSent[peer]})
		asked = append(asked, peer)
	}
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	if err := t.awaitFlushes(cancel, timeout, &fw); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	t.mu.Lock()
	for _, peer := range asked {
		t.greeted[peer] = true
	}
	t.mu.Unlock()
	return nil
}
