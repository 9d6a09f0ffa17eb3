package bootstrap

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// EnvJobSecret names the per-job secret that every connection to the
// rendezvous hub proves it knows (an HMAC over a challenge; the secret
// itself never crosses the network). luacoll's launcher makes one for the
// ranks it starts; for jobs started by torchrun, srun or mpirun across
// hosts, give every rank the same value.
const EnvJobSecret = "LUACOLL_JOB_SECRET"

// nonceLen is the length of each side's challenge nonce.
const nonceLen = 32

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
