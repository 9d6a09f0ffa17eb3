package trace

import (
	"os"
	"strings"
	"testing"
)

// Check accepts a well-formed trace and names what is wrong with each
// malformed one.
func TestCheck(t *testing.T) {
	const meta = `{"name":"process_name","ph":"M","ts":0,"pid":0,"tid":0,"args":{"name":"rank 0"}},`
	good := `{"traceEvents":[` + meta + `
{"name":"put","cat":"window","ph":"X","ts":1.000,"dur":2.000,"pid":0,"tid":1,"args":{"peer":1}},
{"name":"wait_signal","ph":"X","ts":3.000,"dur":0.000,"pid":0,"tid":1},
{"name":"barrier","ph":"i","ts":3.000,"pid":0,"tid":1,"s":"t"},
{"name":"sync","ph":"X","ts":0.500,"dur":4.000,"pid":0,"tid":0}]}`
	c, err := Check([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Events != 5 || c.ByPhase["X"] != 3 || c.Slices[[2]int{0, 1}] != 2 || len(c.Ranks) != 1 {
		t.Fatalf("%+v", c)
	}
	for _, bad := range []struct{ events, want string }{
		{`{"ph":"X","ts":1,"dur":1,"pid":0,"tid":1}`, "name"},
		{`{"name":"a","ph":1,"ts":1,"pid":0,"tid":1}`, "ph"},
		{`{"name":"a","ph":"X","ts":1,"dur":1,"pid":"0","tid":1}`, "pid"},
		{`{"name":"a","ph":"X","ts":1,"dur":1,"pid":0,"tid":1.5}`, "tid"},
		{`{"name":"a","ph":"X","dur":1,"pid":0,"tid":1}`, "ts"},
		{`{"name":"a","ph":"X","ts":1,"pid":0,"tid":1}`, "dur"},
		{`{"name":"a","ph":"X","ts":1,"dur":-1,"pid":0,"tid":1}`, "dur"},
		{`{"name":"a","ph":"i","ts":1,"pid":0,"tid":1,"s":"x"}`, "s:"},
		{`{"name":"a","ph":"B","ts":1,"pid":0,"tid":1}`, `ph "B"`},
		{`{"name":"a","ph":"X","ts":1,"dur":1,"pid":0,"tid":1,"args":[1]}`, "args"},
		{`{"name":"a","ph":"X","ts":1,"dur":1,"pid":0,"tid":1,"cat":2}`, "cat"},
		{`{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{}}`, "args.name"},
		{`{"name":"process_sort_index","ph":"M","pid":0,"tid":0,"args":{"sort_index":"a"}}`, "sort_index"},
		{`{"name":"other","ph":"M","pid":0,"tid":0,"args":{}}`, "unknown metadata"},
		{`{"name":"a","ph":"X","ts":1,"dur":5,"pid":0,"tid":1},{"name":"b","ph":"X","ts":3,"dur":1,"pid":0,"tid":1}`, "before the previous event"},
		{`{"name":"a","ph":"i","ts":4,"pid":0,"tid":0},{"name":"b","ph":"i","ts":3,"pid":0,"tid":0}`, "before the previous event"},
		{`{"name":"a","ph":"i","ts":4,"pid":1,"tid":0}`, "no process_name"},
		{`{"name":"f","cat":"flow","ph":"s","ts":1,"pid":0,"tid":1}`, "integer id"},
		{`{"name":"f","ph":"s","ts":1,"pid":0,"tid":1,"id":3}`, "integer id"},
		{`{"name":"f","cat":"flow","ph":"f","bp":"e","ts":1,"pid":0,"tid":1,"id":3}`, "ends but never starts"},
	} {
		_, err := Check([]byte(`{"traceEvents":[` + meta + bad.events + `]}`))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error about %s", bad.events, err, bad.want)
		}
	}
	for _, top := range []string{`[]`, `{"events":[]}`, `{"traceEvents":{}}`, `nope`} {
		if _, err := Check([]byte(top)); err == nil {
			t.Errorf("%s: accepted", top)
		}
	}
	// A flow's ends lie inside slices (not after them on their track), on
	// any rank; one that starts and has no end yet is fine.
	flows := `{"traceEvents":[` + meta + `{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"rank 1"}},
{"name":"put_signal","ph":"X","ts":1,"dur":4,"pid":0,"tid":1},{"name":"f","cat":"flow","ph":"s","ts":3,"pid":0,"tid":1,"id":7},
{"name":"f","cat":"flow","ph":"s","ts":4,"pid":0,"tid":1,"id":8},
{"name":"wait","ph":"X","ts":2,"dur":6,"pid":1,"tid":1},{"name":"f","cat":"flow","ph":"f","bp":"e","ts":5,"pid":1,"tid":1,"id":7}]}`
	if c, err := Check([]byte(flows)); err != nil || c.Flows != 1 {
		t.Fatalf("flows: %+v, %v", c, err)
	}
	// Other tracks and other ranks do not order each other.
	other := `{"traceEvents":[` + meta + `{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"rank 1"}},
{"name":"a","ph":"X","ts":5,"dur":5,"pid":0,"tid":1},{"name":"b","ph":"X","ts":1,"dur":1,"pid":0,"tid":0},{"name":"c","ph":"X","ts":1,"dur":1,"pid":1,"tid":1}]}`
	if _, err := Check([]byte(other)); err != nil {
		t.Fatal(err)
	}
}

// TestCheckTraceFiles checks the trace files named in LUACOLL_CHECK_TRACES
// (space-separated), for runs on machines without Go: scripts/gpu-suite.sh
// checks the traces of its CUDA runs with bin/trace.test.
func TestCheckTraceFiles(t *testing.T) {
	files := strings.Fields(os.Getenv("LUACOLL_CHECK_TRACES"))
	if len(files) == 0 {
		t.Skip("LUACOLL_CHECK_TRACES names no trace files to check")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Check(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.ByPhase[PhaseComplete] == 0 {
			t.Fatalf("%s: no slices", f)
		}
		t.Logf("%s: %d events (%d slices, %d instants) of ranks %v", f, c.Events, c.ByPhase[PhaseComplete], c.ByPhase[PhaseInstant], c.Ranks)
	}
}
