package launch

import (
	"strings"
	"testing"
)

func TestJobSecret(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	if s := JobSecret(env(map[string]string{EnvJobSecret: "x", "SLURM_JOB_ID": "1"})); s != "x" {
		t.Errorf("set secret: %q", s)
	}
	a := JobSecret(env(map[string]string{"SLURM_JOB_ID": "1"}))
	b := JobSecret(env(map[string]string{"SLURM_JOB_ID": "2"}))
	if a == b {
		t.Error("two Slurm jobs without a secret share a key")
	}
	s1, err1 := NewJobSecret()
	s2, err2 := NewJobSecret()
	if err1 != nil || err2 != nil || s1 == s2 || len(s1) != 64 {
		t.Errorf("NewJobSecret: %q %q %v %v", s1, s2, err1, err2)
	}
	out, _ := withJobSecret([]string{"A=1"})
	if len(out) != 2 || !strings.HasPrefix(out[1], EnvJobSecret+"=") {
		t.Errorf("withJobSecret added %v", out)
	}
	kept, _ := withJobSecret([]string{EnvJobSecret + "=mine"})
	if len(kept) != 1 {
		t.Errorf("withJobSecret replaced the user's secret: %v", kept)
	}
}
