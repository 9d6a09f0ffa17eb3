package knobs

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Class says what a knob is for.
type Class string

const (
	// Tuning knobs change how fast a run goes, never what it computes.
	Tuning Class = "tuning"
	// Debug knobs force a choice or turn an optimisation off, to look into
	// a run or to measure one protocol against another.
	Debug Class = "debug"
)

// Knob is one entry of the registry.
type Knob struct {
	Name    string // the environment variable
	Default string // what applies when it is unset, as the docs say it
	Unit    string // the unit of its value ("" for words)
	Doc     string // one line: what it sets
	Class   Class
	// check validates a value set in the environment, with no name in
	// its error (Load adds it).
	check func(string) error
}

// registry is every knob, in the order the docs list them (built once by
// the declarations below, never changed).
var registry []*Knob

func add(k *Knob) *Knob {
	registry = append(registry, k)
	return k
}

// All returns the knobs of the registry, tuning ones first.
func All() []*Knob {
	out := slices.Clone(registry)
	slices.SortStableFunc(out, func(a, b *Knob) int {
		if a.Class == b.Class {
			return 0
		}
		if a.Class == Tuning {
			return -1
		}
		return 1
	})
	return out
}

// Lookup returns the knob named name.
func Lookup(name string) (*Knob, bool) {
	for _, k := range registry {
		if k.Name == name {
			return k, true
		}
	}
	return nil, false
}

// Set is the knobs' values read from one environment: only values that
// passed their knob's check; a knob set to "" counts as unset.
type Set struct {
	raw map[string]string
	// refused are the values the environment gave that their knobs
	// cannot take (Err names them).
	refused map[string]string
	err     error
}

// Load reads every knob through lookup (os.LookupEnv when nil). A value a
// knob cannot take leaves that knob at its default, and Err reports every
// such value, each naming its variable.
func Load(lookup func(string) (string, bool)) *Set {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s := &Set{raw: map[string]string{}, refused: map[string]string{}}
	var errs []error
	for _, k := range registry {
		v, ok := lookup(k.Name)
		if v = strings.TrimSpace(v); !ok || v == "" {
			continue
		}
		if err := k.check(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", k.Name, v, err))
			s.refused[k.Name] = v
			continue
		}
		s.raw[k.Name] = v
	}
	s.err = errors.Join(errs...)
	return s
}

// Err reports the values of the environment that no knob could take.
func (s *Set) Err() error { return s.err }

// Value returns knob k's value set in the environment, and whether it is
// set.
func (s *Set) Value(k *Knob) (string, bool) {
	v, ok := s.raw[k.Name]
	return v, ok
}

// current is the process's set: read at the first Current call.
var current atomic.Pointer[Set]

// Current returns the knobs of this process, read from its environment
// once, at the first call.
func Current() *Set {
	if s := current.Load(); s != nil {
		return s
	}
	current.CompareAndSwap(nil, Load(nil))
	return current.Load()
}

// Reload reads the environment again and makes that the process's set;
// for tests that set a knob with t.Setenv (and for their cleanup).
func Reload() *Set {
	s := Load(nil)
	current.Store(s)
	return s
}

// Entry is one knob's value in effect.
type Entry struct {
	Knob *Knob
	// Value is what the environment set, or the default.
	Value string
	// Source is "environment", "default", or "refused" (the environment's
	// value, which the knob cannot take: the command stops on it).
	Source string
}

// Effective lists every knob (All's order) with its value in effect.
func (s *Set) Effective() []Entry {
	var out []Entry
	for _, k := range All() {
		e := Entry{Knob: k, Value: k.Default, Source: "default"}
		if v, ok := s.raw[k.Name]; ok {
			e.Value, e.Source = v, "environment"
		} else if v, ok := s.refused[k.Name]; ok {
			e.Value, e.Source = v, "refused"
		}
		out = append(out, e)
	}
	return out
}

// UintKnob is a knob whose value is a whole number in [min, max], with K,
// M or G allowed after it when sized.
type UintKnob struct {
	*Knob
	min, max uint64
	sized    bool
}

func newUint(k Knob, lo, hi uint64, sized bool) *UintKnob {
	u := &UintKnob{min: lo, max: hi, sized: sized}
	k.check = func(v string) error { _, err := u.parse(v); return err }
	u.Knob = add(&k)
	return u
}

func (u *UintKnob) parse(v string) (uint64, error) {
	n, ok := parseUint(v, u.sized)
	if !ok || n < u.min || n > u.max {
		what := "a whole number"
		if u.sized {
			what = "a size in bytes with an optional K, M or G (e.g. 32M)"
		}
		return 0, fmt.Errorf("want %s from %d to %d", what, u.min, u.max)
	}
	return n, nil
}

// Get returns the knob's value in the process's set, and whether it is
// set.
func (u *UintKnob) Get() (uint64, bool) { return u.From(Current()) }

// From returns the knob's value in s, and whether it is set.
func (u *UintKnob) From(s *Set) (uint64, bool) {
	v, ok := s.Value(u.Knob)
	if !ok {
		return 0, false
	}
	n, err := u.parse(v)
	return n, err == nil
}

// Or returns the knob's value, or def where it is unset.
func (u *UintKnob) Or(def uint64) uint64 {
	if v, ok := u.Get(); ok {
		return v
	}
	return def
}

// parseUint reads a whole number, with a K, M or G suffix when sized.
func parseUint(s string, sized bool) (uint64, bool) {
	if sized {
		return ParseSize(s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// ParseSize reads a size in bytes with an optional K, M or G suffix
// (binary, either case), as sysfs writes cache sizes ("32768K") and as the
// command line takes them ("64M"); false when it is none, or too large.
func ParseSize(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	mult := uint64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		}
		if mult != 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > (1<<63)/mult {
		return 0, false
	}
	return n * mult, true
}

// MicrosKnob is a knob whose value is a duration in microseconds (a
// decimal number from 0 to max).
type MicrosKnob struct {
	*Knob
	max float64
}

func newMicros(k Knob, hi float64) *MicrosKnob {
	m := &MicrosKnob{max: hi}
	k.Unit = "us"
	k.check = func(v string) error { _, err := m.parse(v); return err }
	m.Knob = add(&k)
	return m
}

func (m *MicrosKnob) parse(v string) (time.Duration, error) {
	us, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(us) || us < 0 || us > m.max {
		return 0, fmt.Errorf("want microseconds from 0 to %g", m.max)
	}
	return time.Duration(us * float64(time.Microsecond)), nil
}

// Get returns the knob's value in the process's set, and whether it is
// set.
func (m *MicrosKnob) Get() (time.Duration, bool) { return m.From(Current()) }

// From returns the knob's value in s, and whether it is set.
func (m *MicrosKnob) From(s *Set) (time.Duration, bool) {
	v, ok := s.Value(m.Knob)
	if !ok {
		return 0, false
	}
	d, err := m.parse(v)
	return d, err == nil
}

// Or returns the knob's value, or def where it is unset.
func (m *MicrosKnob) Or(def time.Duration) time.Duration {
	if v, ok := m.Get(); ok {
		return v
	}
	return def
}

// WordKnob is a knob whose value is one of a list of words, or any text
// when the list is empty (its reader then checks it and names the
// variable in its error).
type WordKnob struct {
	*Knob
	words []string
}

func newWord(k Knob, words ...string) *WordKnob {
	w := &WordKnob{words: words}
	k.check = func(v string) error {
		if len(words) > 0 && !slices.Contains(words, v) {
			return fmt.Errorf("want one of %s", strings.Join(words, ", "))
		}
		return nil
	}
	w.Knob = add(&k)
	return w
}

// newWordChecked is a word knob whose values check reads (any text it
// takes).
func newWordChecked(k Knob, check func(string) error) *WordKnob {
	w := &WordKnob{}
	k.check = check
	w.Knob = add(&k)
	return w
}

// checkTransport checks LUACOLL_TRANSPORT's form (TransportItems).
func checkTransport(v string) error {
	_, err := TransportItems(v)
	return err
}

// TransportItem is one item of LUACOLL_TRANSPORT: Peer (-1: every other
// peer) forced to Kind, "shm", "nvl" or "net".
type TransportItem struct {
	Peer int
	Kind string
}

// TransportItems reads LUACOLL_TRANSPORT's items: KIND or PEER=KIND,
// comma-separated, PEER a rank or *. Whether a rank is in the job is the
// transport's to say (ParseOverride), once the job's size is known.
func TransportItems(v string) ([]TransportItem, error) {
	var out []TransportItem
	for _, item := range strings.Split(v, ",") {
		peer, kind, found := strings.Cut(strings.TrimSpace(item), "=")
		if !found {
			peer, kind = "*", peer
		}
		it := TransportItem{Peer: -1, Kind: strings.TrimSpace(kind)}
		switch it.Kind {
		case "shm", "nvl", "net":
		case "self":
			return nil, fmt.Errorf("%q: self cannot be forced", item)
		default:
			return nil, fmt.Errorf("%q: want net (every other peer) or a list like 1=net,3=shm (kinds shm, nvl, net; * for every other peer)", item)
		}
		if p := strings.TrimSpace(peer); p != "*" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%q: peer %q is not a rank", item, p)
			}
			it.Peer = n
		}
		out = append(out, it)
	}
	return out, nil
}

// Words returns the values the knob takes (nil: any text).
func (w *WordKnob) Words() []string { return slices.Clone(w.words) }

// Get returns the knob's value in the process's set ("" where unset).
func (w *WordKnob) Get() string { return w.From(Current()) }

// From returns the knob's value in s ("" where unset).
func (w *WordKnob) From(s *Set) string {
	v, _ := s.Value(w.Knob)
	return v
}
