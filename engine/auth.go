package engine

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// EnvJobSecret names the per-job secret that every connection to the
// rendezvous hub proves it knows (an HMAC over a challenge; the secret
// itself never crosses the network). luacoll's launcher makes one for the
// ranks it starts; for jobs started by torchrun, srun or mpirun across
// hosts, give every rank the same value.
const EnvJobSecret = "LUACOLL_JOB_SECRET"

// nonceLen is the length of each side's challenge nonce.
const nonceLen = 32

// jobIdentityVars are what tells jobs apart when no secret is set: they
// keep the ranks of two jobs from joining each other's hub, but are no
// secret (anyone who can read them can join).
var jobIdentityVars = []string{EnvJob, "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID",
	"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "MASTER_ADDR", "MASTER_PORT", EnvAddr}

// JobSecret returns the secret of this rank's job: EnvJobSecret, or, when
// that is unset, a value made from the launcher's job identity (see
// jobIdentityVars).
func JobSecret(getenv func(string) string) string {
	if s := getenv(EnvJobSecret); s != "" {
		return s
	}
	var b strings.Builder
	b.WriteString("no secret set;")
	for _, v := range jobIdentityVars {
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

// jobKey is the HMAC key of a secret.
func jobKey(secret string) []byte {
	sum := sha256.Sum256([]byte("luacoll job key\x00" + secret))
	return sum[:]
}

func newNonce() ([]byte, error) {
	n := make([]byte, nonceLen)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("making a nonce: %w", err)
	}
	return n, nil
}

// helloMAC is what a rank proves with its hello: it knows the key, for
// this hub's challenge, and for what it says about itself.
func helloMAC(key, hubNonce, rankNonce []byte, rank, size uint32, host string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("luacoll hello\x00"))
	m.Write(hubNonce)
	m.Write(rankNonce)
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], rank)
	binary.BigEndian.PutUint32(b[4:], size)
	m.Write(b[:])
	m.Write([]byte(host))
	return m.Sum(nil)
}

// acceptMAC is what the hub proves back: it knows the key too.
func acceptMAC(key, hubNonce, rankNonce []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("luacoll accept\x00"))
	m.Write(hubNonce)
	m.Write(rankNonce)
	return m.Sum(nil)
}
