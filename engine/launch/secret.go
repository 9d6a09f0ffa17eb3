package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/luacoll/luacoll/engine/bootstrap"
)

// EnvJobSecret names the per-job secret of the rendezvous
// (bootstrap.EnvJobSecret).
const EnvJobSecret = bootstrap.EnvJobSecret

// secretIdentityVars are what tells jobs apart when no secret is set: they
// keep the ranks of two jobs from joining each other's hub, but are no
// secret (anyone who can read them can join).
var secretIdentityVars = []string{EnvJob, "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID",
	"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "MASTER_ADDR", "MASTER_PORT", EnvAddr}

// JobSecret returns the secret of this rank's job: EnvJobSecret, or, when
// that is unset, a value made from the launcher's job identity (see
// secretIdentityVars).
func JobSecret(getenv func(string) string) string {
	if s := getenv(EnvJobSecret); s != "" {
		return s
	}
	var b strings.Builder
	b.WriteString("no secret set;")
	for _, v := range secretIdentityVars {
		fmt.Fprintf(&b, "%s=%s;", v, getenv(v))
	}
	return b.String()
}

// NewJobSecret returns 32 random bytes in hex.
func NewJobSecret() (string, error) {
	var buf [32]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("making a job secret: %w", err)
	}
	return hex.EncodeToString(buf[:]), nil
}

// withJobSecret adds a new EnvJobSecret to env unless it has one.
func withJobSecret(env []string) ([]string, error) {
	for _, kv := range env {
		if strings.HasPrefix(kv, EnvJobSecret+"=") && len(kv) > len(EnvJobSecret)+1 {
			return env, nil
		}
	}
	s, err := NewJobSecret()
	if err != nil {
		return nil, err
	}
	return append(env, EnvJobSecret+"="+s), nil
}
