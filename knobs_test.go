package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/luacoll/luacoll/engine/bootstrap"
	"github.com/luacoll/luacoll/engine/launch"
	"github.com/luacoll/luacoll/engine/trace"
	"github.com/luacoll/luacoll/repl"
	"github.com/luacoll/luacoll/transport"
	"github.com/luacoll/luacoll/transport/gpu"
	"github.com/luacoll/luacoll/transport/knobs"
	"github.com/luacoll/luacoll/transport/launchenv"
)

// docs/tuning.md is what `luacoll docs --knobs` writes from the registry
// (`make docs` rewrites it).
func TestTuningDocsComeFromTheRegistry(t *testing.T) {
	committed, err := os.ReadFile("docs/tuning.md")
	if err != nil || string(committed) != tuningMarkdown() {
		t.Errorf("docs/tuning.md is stale: run `make docs` (%v)", err)
	}
	var out, errOut strings.Builder
	if code := realMain([]string{"docs", "--knobs"}, &out, &errOut); code != 0 || out.String() != tuningMarkdown() {
		t.Errorf("luacoll docs --knobs: exit %d, %s", code, errOut.String())
	}
	for _, k := range knobs.All() {
		if !strings.Contains(string(committed), "`"+k.Name+"`") {
			t.Errorf("docs/tuning.md lacks %s", k.Name)
		}
	}
}

// The names other packages give the launcher's variables and the knobs
// are the registries'.
func TestEnvironmentNamesAreRegistered(t *testing.T) {
	for _, name := range []string{launch.EnvRank, launch.EnvSize, launch.EnvLocalRank, launch.EnvLocalSize, launch.EnvNode,
		launch.EnvAddr, launch.EnvJob, launch.EnvListenFD, launch.EnvPrefixed, launch.EnvProgressFD, launch.EnvMPS,
		launch.EnvDeviceIndex, launch.EnvLogicalNode, launch.EnvShmDir, launch.EnvScriptFD, launch.EnvScriptName, launch.EnvJoinFD, launch.EnvReportDir,
		bootstrap.EnvJobSecret, repl.EnvControl, trace.EnvDir} {
		if !launchenv.Known(name) {
			t.Errorf("%s is not in launchenv.Vars", name)
		}
	}
	if _, ok := knobs.Lookup(transport.OverrideEnv); !ok {
		t.Errorf("%s is not a knob", transport.OverrideEnv)
	}
	if got, want := knobs.AGPProtocol.Words(), append([]string{"auto"}, gpu.AGPProtocols...); !slices.Equal(got, want) {
		t.Errorf("%s takes %q, the all-gather %q", knobs.AGPProtocol.Name, got, want)
	}
}

// `luacoll info --tuning` lists every knob with its value and source, and
// refuses a value a knob cannot take, naming the variable.
func TestInfoTuning(t *testing.T) {
	t.Cleanup(func() { knobs.Reload() }) // after t.Setenv's own
	t.Setenv(knobs.NetLanes.Name, "2")
	knobs.Reload()
	var out, errOut strings.Builder
	if code := realMain([]string{"info", "--tuning"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, k := range knobs.All() {
		if !strings.Contains(out.String(), k.Name) {
			t.Errorf("info --tuning lacks %s:\n%s", k.Name, out.String())
		}
	}
	if !strings.Contains(out.String(), "2 workers (environment)") {
		t.Errorf("info --tuning does not say where NET_LANES came from:\n%s", out.String())
	}
	if got := strayVariables([]string{"LUACOLL_ORDERING=3", "LUACOLL_RANK=0", "LUACOLL_NET_LANES=2", "HOME=/"}); !slices.Equal(got, []string{"LUACOLL_ORDERING"}) {
		t.Errorf("strayVariables = %q, want the retired LUACOLL_ORDERING only", got)
	}
	t.Setenv(knobs.NetLanes.Name, "-1")
	knobs.Reload()
	out.Reset()
	errOut.Reset()
	if code := realMain([]string{"run", "-e", "print(1)"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `LUACOLL_NET_LANES="-1"`) {
		t.Errorf("run with NET_LANES=-1: exit %d, %q, want 2 and the variable named", code, errOut.String())
	}
}

// No file outside transport/knobs/ and transport/launchenv/ reads a LUACOLL_ variable with
// os.Getenv or os.LookupEnv: knobs go through the registry, the
// launcher's variables through launchenv. Test files are not checked
// (their LUACOLL_TEST_* and LUACOLL_PROBE variables gate tests).
func TestKnobReadsOnlyInTheRegistry(t *testing.T) {
	bad, err := strayEnvReads(os.DirFS("."), modulePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// The checker finds a read by literal and by a constant of another
// package, and allows transport/knobs/ and transport/launchenv/.
func TestStrayEnvReadsChecker(t *testing.T) {
	fsys := fstest.MapFS{
		"a/a.go":                   {Data: []byte("package a\nimport \"os\"\nconst E = \"LUACOLL_X\"\nfunc f() { _ = os.Getenv(\"LUACOLL_Y\"); _ = os.Getenv(\"HOME\") }\n")},
		"b/b.go":                   {Data: []byte("package b\nimport (\"os\"; x \"m/a\")\nfunc g() { os.LookupEnv(x.E) }\n")},
		"transport/knobs/k.go":     {Data: []byte("package knobs\nimport \"os\"\nfunc h() { os.Getenv(\"LUACOLL_Z\") }\n")},
		"transport/launchenv/l.go": {Data: []byte("package launchenv\nimport \"os\"\nfunc h() { os.Getenv(\"LUACOLL_RANK\") }\n")},
		"c/c_test.go":              {Data: []byte("package c\nimport \"os\"\nfunc h() { os.Getenv(\"LUACOLL_TEST\") }\n")},
	}
	bad, err := strayEnvReads(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`a/a.go:4: os.Getenv("LUACOLL_Y") outside transport/knobs/ and transport/launchenv/`, `b/b.go:3: os.LookupEnv("LUACOLL_X") outside transport/knobs/ and transport/launchenv/`}
	if fmt.Sprint(bad) != fmt.Sprint(want) {
		t.Errorf("got %q\nwant %q", bad, want)
	}
}

// strayEnvReads parses the non-test Go files of the module at fsys and
// returns every os.Getenv or os.LookupEnv call outside transport/knobs/ and
// transport/launchenv/ whose argument is a LUACOLL_ name: a string literal, or a
// string constant of the module (of the same package or, by selector, of
// an imported one).
func strayEnvReads(fsys fs.FS, module string) ([]string, error) {
	type file struct {
		path, dir string
		f         *ast.File
	}
	var files []file
	consts := map[string]string{} // dir + "." + name -> value
	fset := token.NewFileSet()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipLayerDir(fsys, p, d.Name())
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		files = append(files, file{p, path.Dir(p), f})
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[path.Dir(p)+"."+name.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, fl := range files {
		if fl.dir == "transport/knobs" || fl.dir == "transport/launchenv" {
			continue
		}
		imports := map[string]string{} // local name -> package dir
		for _, im := range fl.f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			dir, ok := modulePackage(module, ip)
			if !ok {
				continue
			}
			name := path.Base(ip)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = dir
		}
		value := func(e ast.Expr) string {
			switch e := e.(type) {
			case *ast.BasicLit:
				v, _ := strconv.Unquote(e.Value)
				return v
			case *ast.Ident:
				return consts[fl.dir+"."+e.Name]
			case *ast.SelectorExpr:
				if x, ok := e.X.(*ast.Ident); ok {
					return consts[imports[x.Name]+"."+e.Sel.Name]
				}
			}
			return ""
		}
		ast.Inspect(fl.f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "os" || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
				return true
			}
			if v := value(call.Args[0]); strings.HasPrefix(v, "LUACOLL_") {
				bad = append(bad, fmt.Sprintf("%s:%d: os.%s(%q) outside transport/knobs/ and transport/launchenv/", fl.path, fset.Position(call.Pos()).Line, sel.Sel.Name, v))
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad, nil
}
