package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// netStatus is what each rank publishes while a window's region is
// registered with the network.
type netStatus struct {
	Addr []byte `json:"a,omitempty"` // the rank's network address
	Key  []byte `json:"k,omitempty"` // its packed registration
	Err  string `json:"err,omitempty"`
}

// ShareNetwork is collective, and every rank calls it when topo.AnyNet():
// each rank that some peer reaches over the network registers reg's local
// memory with net, the registrations and addresses are exchanged, and each
// rank connects to (once per peer) and unpacks the keys of the peers it
// reaches over the network, into reg.Keys. The keys are released when the
// region's peer mappings are dropped, the registration when it is closed.
// net may be nil on a rank that has no network: every rank then fails with
// the reason.
func ShareNetwork(ctx context.Context, ex Exchanger, topo *Topology, net Network, reg *Region) error {
	rank, n := ex.Rank(), ex.Size()
	var st netStatus
	var registration Registration
	keys := make([]RemoteKey, n)
	release := func() error {
		var errs []error
		for r, k := range keys {
			if k != nil {
				errs = append(errs, k.Close())
				keys[r] = nil
			}
		}
		if registration != nil {
			errs = append(errs, registration.Close())
			registration = nil
		}
		return errors.Join(errs...)
	}
	needsAddr := topo.ReachedByNet(rank)
	for r := range topo.Kinds {
		needsAddr = needsAddr || topo.Kinds[r] == KindNet
	}
	var err error
	switch {
	case net == nil:
		err = errors.New("peers are reached over the network, and this rank has no network transport")
	case needsAddr:
		st.Addr, err = net.Address()
		if err == nil && topo.ReachedByNet(rank) {
			registration, err = net.Register(reg.Local, reg.Size)
			if err == nil {
				st.Key = registration.Packed()
			}
		}
	}
	if err != nil {
		st = netStatus{Err: err.Error()}
	}
	all, err := exchangeNet(ctx, ex, st)
	if err == nil {
		err = firstNetError(all, "registering with the network")
	}
	if err == nil {
		var local error
		for r, k := range topo.Kinds {
			if k != KindNet {
				continue
			}
			if local = net.Connect(r, all[r].Addr); local != nil {
				local = fmt.Errorf("connecting to rank %d: %w", r, local)
				break
			}
			if keys[r], local = net.Unpack(r, all[r].Key); local != nil {
				local = fmt.Errorf("rank %d's key: %w", r, local)
				break
			}
		}
		st = netStatus{}
		if local != nil {
			st.Err = local.Error()
		}
		all, err = exchangeNet(ctx, ex, st)
		if err == nil {
			err = firstNetError(all, "connecting over the network")
		}
		// Every rank has connected: prove the new endpoints wired up
		// before any rank goes on (and may end, closing its network).
		if g, ok := net.(Greeter); ok && err == nil {
			st = netStatus{}
			if local := g.Greet(ctx.Err, greetTimeout); local != nil {
				st.Err = local.Error()
			}
			all, err = exchangeNet(ctx, ex, st)
			if err == nil {
				err = firstNetError(all, "greeting the network peers")
			}
		}
	}
	if err != nil {
		_ = release()
		return err
	}
	reg.Keys = keys
	unmap, closeFn := reg.unmap, reg.close
	reg.unmap = func() error {
		var errs []error
		for r, k := range keys {
			if k != nil {
				errs = append(errs, k.Close())
				keys[r] = nil
			}
		}
		if unmap != nil {
			errs = append(errs, unmap())
		}
		return errors.Join(errs...)
	}
	reg.close = func() error {
		err := release()
		if closeFn != nil {
			err = errors.Join(err, closeFn())
		}
		return err
	}
	return nil
}

// greetTimeout bounds a window's greeting of its network peers: each
// answers from its progress thread, whatever its script is doing.
const greetTimeout = 30 * time.Second

func exchangeNet(ctx context.Context, ex Exchanger, st netStatus) ([]netStatus, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	raw, err := ex.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([]netStatus, len(raw))
	for r, x := range raw {
		if err := json.Unmarshal(x, &out[r]); err != nil {
			return nil, fmt.Errorf("network status from rank %d: %w", r, err)
		}
	}
	return out, nil
}

func firstNetError(all []netStatus, what string) error {
	var msgs []string
	for r, s := range all {
		if s.Err != "" {
			msgs = append(msgs, fmt.Sprintf("rank %d: %s", r, s.Err))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", what, strings.Join(msgs, "; "))
}
