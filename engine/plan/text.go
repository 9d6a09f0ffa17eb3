package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/window"
)

// ParseOp is the inverse of Op.String: one op in the plans' text format,
// "kind name=value ... @file:line" (the site may be left out).
func ParseOp(line string) (Op, error) {
	var o Op
	f := strings.Fields(line)
	if len(f) == 0 {
		return o, fmt.Errorf("empty op")
	}
	k, ok := ParseKind(f[0])
	if !ok {
		return o, fmt.Errorf("unknown op %q", f[0])
	}
	o.Kind = k
	for _, kv := range f[1:] {
		if at, ok := strings.CutPrefix(kv, "@"); ok {
			site, err := parseSite(at)
			if err != nil {
				return o, err
			}
			o.Site = site
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return o, fmt.Errorf("%q: want name=value", kv)
		}
		if err := o.setField(name, val); err != nil {
			return o, fmt.Errorf("%s: %w", name, err)
		}
	}
	return o, nil
}

func parseSite(s string) (Site, error) {
	if s == "?" {
		return Site{}, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Site{File: s}, nil
	}
	line, err := strconv.Atoi(s[i+1:])
	if err != nil || line <= 0 {
		return Site{File: s}, nil // a file name with a colon, no line
	}
	return Site{File: s[:i], Line: line}, nil
}

// ParseBuf is the inverse of BufName.
func ParseBuf(s string) (int, error) {
	if s == "w" {
		return WindowBuf, nil
	}
	if rest, ok := strings.CutPrefix(s, "b"); ok {
		if b, err := strconv.Atoi(rest); err == nil && b > 0 {
			return b, nil
		}
	}
	return 0, fmt.Errorf("buffer %q: want w, b1, b2 and so on", s)
}

func (o *Op) setField(name, val string) error {
	num := func() (uint64, error) { return strconv.ParseUint(val, 10, 64) }
	small := func(p *int) error {
		v, err := strconv.Atoi(val)
		*p = v
		return err
	}
	if o.Kind == Reduce || o.Kind == ReduceFrom {
		if done, err := o.setReduceField(name, val); done {
			return err
		}
	}
	var err error
	switch name {
	case "peer":
		err = small(&o.Peer)
	case "off":
		o.Off, err = num()
	case "src", "dst", "buf":
		o.Buf, err = ParseBuf(val)
	case "src_off", "dst_off":
		o.BufOff, err = num()
	case "n":
		o.N, err = num()
	case "sig":
		err = small(&o.Sig)
	case "value":
		if o.Kind.HasSignal() {
			o.SigValue, err = num()
		} else {
			o.Value, err = num()
		}
	case "sigop":
		switch val {
		case window.SigAdd.String():
			o.SigOp = window.SigAdd
		case window.SigSet.String():
			o.SigOp = window.SigSet
		default:
			err = fmt.Errorf("unknown signal op %q", val)
		}
	case "ctr":
		err = small(&o.Ctr)
	case "cvalue":
		o.CtrValue, err = num()
	case "cmp":
		o.Cmp, err = transport.ParseCmp(val)
	case "id":
		err = small(&o.Bar)
	case "kind":
		err = fmt.Errorf("unknown fill %q", val)
		for k, n := range fillNames {
			if n == val {
				o.FillKind, err = k, nil
			}
		}
	case "arg":
		o.FillArg, err = num()
	default:
		err = fmt.Errorf("unknown field")
	}
	return err
}
