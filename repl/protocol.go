package repl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// EnvControl is the variable through which the front end tells each rank
// where its control socket listens. A process started by the launcher with
// it set is a REPL worker.
const EnvControl = "LUACOLL_REPL_ADDR"

// Message types. The front end sends eval, interrupt, complete, status and
// quit; a worker sends hello once, then result, candidates, status and
// exit.
const (
	msgHello      = "hello"
	msgEval       = "eval"
	msgInterrupt  = "interrupt"
	msgComplete   = "complete"
	msgCandidates = "candidates"
	msgStatus     = "status"
	msgQuit       = "quit"
	msgResult     = "result"
	msgExit       = "exit"
)

// message is one line of JSON on a control connection. Which fields are
// set depends on Type.
type message struct {
	Type string `json:"type"`
	ID   uint64 `json:"id,omitempty"`
	Rank int    `json:"rank"`

	// hello
	PID    int    `json:"pid,omitempty"`
	Job    string `json:"job,omitempty"`
	Device string `json:"device,omitempty"`

	// eval
	Code string `json:"code,omitempty"`
	Name string `json:"name,omitempty"`
	// Subset, when set, says the chunk runs on these ranks only (as
	// "0,2 of 0-3"): the worker refuses collectives for it.
	Subset string `json:"subset,omitempty"`
	// Script says Code is a file's source, run as a script with Args (arg
	// and ...), as :load and -i do.
	Script bool     `json:"script,omitempty"`
	Args   []string `json:"args,omitempty"`

	// result (and exit, which carries the output printed before it)
	Output      string   `json:"output,omitempty"`
	Values      []string `json:"values,omitempty"`
	Err         string   `json:"err,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"`
	// Stream is empty when the rank's stream is usable after an
	// interrupt, else what is wrong with it.
	Stream string `json:"stream,omitempty"`

	// complete, candidates
	Word       string   `json:"word,omitempty"`
	Candidates []string `json:"candidates,omitempty"`

	// status: the reason the job is aborted on this rank ("" when not)
	Aborted string `json:"aborted,omitempty"`

	// exit: the status os.exit was called with
	ExitCode int `json:"exit_code,omitempty"`
}

// conn is one end of a control connection: whole messages in, whole
// messages out, writes safe from several goroutines.
type conn struct {
	rw  io.ReadWriteCloser
	dec *json.Decoder
	mu  sync.Mutex
	enc *json.Encoder
}

func newConn(rw io.ReadWriteCloser) *conn {
	br := bufio.NewReaderSize(rw, 64<<10)
	return &conn{rw: rw, dec: json.NewDecoder(br), enc: json.NewEncoder(rw)}
}

// send writes one message.
func (c *conn) send(m *message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(m); err != nil {
		return fmt.Errorf("sending %s: %w", m.Type, err)
	}
	return nil
}

// recv reads one message; only one goroutine may call it.
func (c *conn) recv() (*message, error) {
	var m message
	if err := c.dec.Decode(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

func (c *conn) close() error { return c.rw.Close() }
