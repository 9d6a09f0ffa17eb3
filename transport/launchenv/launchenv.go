package launchenv

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Var is one variable of the protocol.
type Var struct {
	Name string
	Doc  string // one line: what it carries
}

// Vars is the protocol: every variable luacoll's launcher sets for its
// ranks (engine/launch names most of them as constants).
var Vars = []Var{
	{"LUACOLL_RANK", "the rank"},
	{"LUACOLL_SIZE", "the number of ranks"},
	{"LUACOLL_LOCAL_RANK", "the rank's index among the ranks of its host (or logical node)"},
	{"LUACOLL_LOCAL_SIZE", "the number of ranks of its host (or logical node)"},
	{"LUACOLL_NODE", "the index of the rank's host (or logical node)"},
	{"LUACOLL_ADDR", "the rendezvous host:port (or Unix socket) where rank 0 listens"},
	{"LUACOLL_JOB", "the job's id (it names the job's files and segments)"},
	{"LUACOLL_JOB_SECRET", "the secret every connection to the rendezvous proves it knows (set it alike on every rank of a job whose ranks another launcher starts)"},
	{"LUACOLL_LISTEN_FD", "rank 0's inherited listening socket"},
	{"LUACOLL_PREFIXED", "the launcher prefixes every output line with the rank"},
	{"LUACOLL_PROGRESS_FD", "rank 0's descriptor for progress lines"},
	{"LUACOLL_JOIN_FD", "the read end of a pipe the launcher closes when a rank fails, so that the ranks still joining the job stop at once"},
	{"LUACOLL_MPS", "job: the launcher started a private MPS control daemon for the job"},
	{"LUACOLL_DEVICE_INDEX", "the index a rank of a logical node picks its GPU by"},
	{"LUACOLL_LOGICAL_NODE", "the rank's logical node (--nodes): a host identity of its own"},
	{"LUACOLL_SHM_DIR", "the logical node's own shared-memory directory (--nodes)"},
	{"LUACOLL_REPORT_DIR", "where a rank of a logical node writes the reports that outlive the job (--nodes; the launcher's temporary directory)"},
	{"LUACOLL_SCRIPT_FD", "the inherited descriptor holding the job's script"},
	{"LUACOLL_SCRIPT_NAME", "the name the script's messages use"},
	{"LUACOLL_REPL_ADDR", "the REPL's control socket, in its ranks"},
	{"LUACOLL_TRACE_DIR", "the directory where every rank writes its part of --trace"},
}

// Known reports whether name is a variable of the protocol.
func Known(name string) bool {
	return slices.ContainsFunc(Vars, func(v Var) bool { return v.Name == name })
}

// Get returns the value of the protocol's variable name in this process's
// environment ("" where unset, and for a name that is not the protocol's:
// knobs are read through package knobs).
func Get(name string) string {
	if !Known(name) {
		return ""
	}
	return os.Getenv(name)
}

// Markdown returns the protocol as a table for the docs.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| variable | what |\n| --- | --- |\n")
	for _, v := range Vars {
		fmt.Fprintf(&b, "| `%s` | %s |\n", v.Name, v.Doc)
	}
	return b.String()
}
