package cuda

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Creating NVLink multicast objects can take a machine's GPUs out of
// service, so this package must never be able to: no entry point whose
// name mentions multicast is in the resolution table, and no name that
// reaches dlsym or cuGetProcAddress (a Go string constant or a C string in
// the shim) does either. Reading the attribute that says whether a device
// supports multicast is allowed; it is a number, not a symbol.

// mentionsMulticast matches any spelling of the word.
var mentionsMulticast = regexp.MustCompile(`(?i)multi_?cast|multimem`)

// multicastName matches an entry point or type name of the multicast API
// inside a longer text ("cuMulticastCreate", "CUmulticastObjectProp").
var multicastName = regexp.MustCompile(`(?i)\bcu\w*multicast\w*`)

// namesMulticastSymbol reports whether a Go string could name a multicast
// symbol: a name-like string (no spaces) that mentions multicast, or one
// that contains such a name. Report text ("multicast supported, not used")
// does not.
func namesMulticastSymbol(s string) bool {
	if multicastName.MatchString(s) {
		return true
	}
	return !strings.ContainsAny(s, " \t\n") && mentionsMulticast.MatchString(s)
}

func TestNoMulticastSymbols(t *testing.T) {
	for s, e := range symbolTable {
		if mentionsMulticast.MatchString(e.name) {
			t.Errorf("symbol %d (%s) is a multicast entry point", s, e.name)
		}
	}

	// The package's sources: here under go test, under cuda/ when the test
	// binary runs from the repository's root (scripts/gpu-suite.sh).
	dir := "."
	if _, err := os.Stat("lc_cuda.h"); err != nil {
		if _, err := os.Stat(filepath.Join("cuda", "lc_cuda.h")); err != nil {
			t.Skip("the cuda package's sources are not here (a test binary run elsewhere); the symbol table was checked")
		}
		dir = "cuda"
	}
	// Every string literal of the package's Go code (what could be handed
	// to dlsym or cuGetProcAddress).
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	scanned := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		// A struct tag names a JSON key, not a symbol.
		tags := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.Field); ok && fd.Tag != nil {
				tags[fd.Tag] = true
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if ok && tags[lit] {
				return true
			}
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				v = lit.Value
			}
			if namesMulticastSymbol(v) {
				t.Errorf("%s: string %s names a multicast symbol", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
		// The cgo preamble is a comment to Go: scan it as C.
		for _, cg := range f.Comments {
			if strings.Contains(cg.Text(), "#include") || strings.Contains(cg.Text(), "#cgo") {
				checkC(t, name+" (cgo preamble)", cg.Text())
			}
		}
	}
	if scanned < 10 {
		t.Fatalf("scanned %d Go files: not the package's directory?", scanned)
	}

	// The C shim, its comments removed.
	shims, err := filepath.Glob(filepath.Join(dir, "*.[ch]"))
	if err != nil {
		t.Fatal(err)
	}
	if len(shims) == 0 {
		t.Fatal("no C shim found")
	}
	for _, name := range shims {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "lc_cuDeviceGetAttribute") && name == "lc_cuda.h" {
			t.Fatalf("%s does not look like the shim", name)
		}
		checkC(t, name, string(src))
	}
}

// checkC reports code (comments stripped) in src that names multicast.
func checkC(t *testing.T, where, src string) {
	t.Helper()
	code := stripCComments(src)
	for i, line := range strings.Split(code, "\n") {
		if mentionsMulticast.MatchString(line) {
			t.Errorf("%s:%d: names multicast: %s", where, i+1, strings.TrimSpace(line))
		}
	}
}

// stripCComments blanks /* */ and // comments, keeping line breaks (string
// literals with comment markers are not expected in the shim).
func stripCComments(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		switch {
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				end = len(src) - i - 2
			}
			b.WriteString(strings.Repeat("\n", strings.Count(src[i:i+2+end], "\n")))
			i += end + 4
		case strings.HasPrefix(src[i:], "//"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			i += end
		default:
			b.WriteByte(src[i])
			i++
		}
	}
	return b.String()
}

// The scan itself finds what it looks for.
func TestMulticastScanFinds(t *testing.T) {
	for _, src := range []string{
		"static inline int lc_cuMulticastCreate(void *f) { return 0; }",
		"p = dlsym(lib, \"cuMulticastAddDevice\");",
		"x = MULTICAST;",
		"/* fine */ CUmulticastObjectProp p;",
	} {
		if code := stripCComments(src); !mentionsMulticast.MatchString(code) {
			t.Errorf("%q: not found", src)
		}
	}
	for s, want := range map[string]bool{
		"cuMulticastCreate": true, "cuMulticastBindMem_v2": true, "x cuMulticastUnbind y": true,
		"MULTICAST": true, "multicast %s, MPS %s": false, MulticastSupported: false, "cuMemCreate": false,
	} {
		if got := namesMulticastSymbol(s); got != want {
			t.Errorf("namesMulticastSymbol(%q) = %v, want %v", s, got, want)
		}
	}
	for _, src := range []string{
		"/* cuMulticastCreate is never resolved */ int x;",
		"int y; // no cuMulticast* here\nint z;",
	} {
		if code := stripCComments(src); mentionsMulticast.MatchString(code) {
			t.Errorf("%q: found in a comment", src)
		}
	}
}
