package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// The import graph against the map: every package of the module has a
// doc.go whose line "// Imports: a, b" (the module's packages by their
// directory, "none" for none) lists what its non-test files may import of
// the module. The standard library and other modules are not checked.

// modulePath is the module's import path (go.mod).
const modulePath = "github.com/luacoll/luacoll"

// layerPkg is one package directory of the module as the check sees it.
type layerPkg struct {
	hasDoc  bool
	allowed map[string]bool   // from doc.go's Imports line (nil: none found)
	docErr  string            // what is wrong with doc.go's Imports line
	imports map[string]string // package of the module imported -> a file importing it
}

// readLayers reads the packages of the module rooted at fsys: each
// directory with non-test Go files, its imports of the module (parsed with
// go/parser, imports only) and the Imports line of its doc.go. Hidden
// directories, testdata and nested modules are skipped.
func readLayers(fsys fs.FS, module string) (map[string]*layerPkg, error) {
	pkgs := map[string]*layerPkg{}
	fset := token.NewFileSet()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipLayerDir(fsys, p, d.Name())
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		dir := path.Dir(p)
		pkg := pkgs[dir]
		if pkg == nil {
			pkg = &layerPkg{imports: map[string]string{}}
			pkgs[dir] = pkg
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			ip, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", p, im.Path.Value, err)
			}
			if dep, ok := modulePackage(module, ip); ok {
				if _, seen := pkg.imports[dep]; !seen {
					pkg.imports[dep] = p
				}
			}
		}
		if name == "doc.go" {
			pkg.hasDoc = true
			pkg.allowed, pkg.docErr = parseImportsLine(string(src))
		}
		return nil
	})
	return pkgs, err
}

// skipLayerDir says whether the walk skips directory p (named name): hidden
// ones, testdata, and the roots of other modules.
func skipLayerDir(fsys fs.FS, p, name string) error {
	if p == "." {
		return nil
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
		return fs.SkipDir
	}
	if _, err := fs.Stat(fsys, path.Join(p, "go.mod")); err == nil {
		return fs.SkipDir
	}
	return nil
}

// modulePackage turns an import path into the directory of a package of
// module ("." for its root); ok is false for other modules and the
// standard library.
func modulePackage(module, ip string) (dir string, ok bool) {
	if ip == module {
		return ".", true
	}
	if rest, found := strings.CutPrefix(ip, module+"/"); found {
		return rest, true
	}
	return "", false
}

// parseImportsLine finds the one "// Imports: ..." line of a doc.go and
// returns the packages it allows, or what is wrong with it.
func parseImportsLine(src string) (map[string]bool, string) {
	var found []string
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "// Imports:"); ok {
			found = append(found, strings.TrimSpace(rest))
		}
	}
	switch len(found) {
	case 0:
		return nil, `no "// Imports:" line`
	case 1:
	default:
		return nil, fmt.Sprintf(`%d "// Imports:" lines, want one`, len(found))
	}
	allowed := map[string]bool{}
	if found[0] == "none" {
		return allowed, ""
	}
	for _, f := range strings.Split(found[0], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Sprintf("an empty entry in %q", found[0])
		}
		allowed[f] = true
	}
	return allowed, ""
}

// checkLayers returns every violation of the map, sorted: a package
// without doc.go or without a readable Imports line, an Imports entry that
// is not a package of the module, and an import its doc.go does not allow.
func checkLayers(pkgs map[string]*layerPkg) []string {
	var out []string
	for dir, pkg := range pkgs {
		doc := path.Join(dir, "doc.go")
		switch {
		case !pkg.hasDoc:
			out = append(out, dir+": no doc.go saying the package's job and what it may import")
			continue
		case pkg.docErr != "":
			out = append(out, doc+": "+pkg.docErr)
			continue
		}
		for a := range pkg.allowed {
			if pkgs[a] == nil {
				out = append(out, fmt.Sprintf("%s: allows %s, which is not a package of the module", doc, a))
			}
		}
		for dep, file := range pkg.imports {
			if !pkg.allowed[dep] {
				out = append(out, fmt.Sprintf("%s imports %s, which %s does not allow", file, dep, doc))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestImportGraph: every package imports only what its doc.go allows.
func TestImportGraph(t *testing.T) {
	pkgs, err := readLayers(os.DirFS("."), modulePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".", "engine", "engine/allgather", "window", "transport", "transport/gpu", "kernels"} {
		if pkgs[want] == nil {
			t.Fatalf("package %s not found: the walk misses packages", want)
		}
	}
	for _, v := range checkLayers(pkgs) {
		t.Error(v)
	}
}

// TestImportGraphChecker: the check on a small module in memory, clean and
// then with violations planted.
func TestImportGraphChecker(t *testing.T) {
	mod := fstest.MapFS{
		"go.mod":             {Data: []byte("module m\n")},
		"doc.go":             {Data: []byte("// Command m.\n//\n// Imports: up, down\npackage main\n")},
		"main.go":            {Data: []byte("package main\n\nimport (\n\t\"fmt\"\n\t\"m/up\"\n)\n")},
		"up/doc.go":          {Data: []byte("// Package up.\n//\n// Imports: down\npackage up\n")},
		"up/up.go":           {Data: []byte("package up\n\nimport \"m/down\"\n")},
		"down/doc.go":        {Data: []byte("// Package down.\n//\n// Imports: none\npackage down\n")},
		"down/down.go":       {Data: []byte("package down\n\nimport \"os\"\n")},
		"down/down_test.go":  {Data: []byte("package down\n\nimport \"m/up\"\n")}, // tests are not checked
		"down/testdata/x.go": {Data: []byte("package x\n\nimport \"m/up\"\n")},
		"other/go.mod":       {Data: []byte("module other\n")},
		"other/o.go":         {Data: []byte("package other\n\nimport \"m/up\"\n")},
	}
	check := func(fsys fs.FS) []string {
		t.Helper()
		pkgs, err := readLayers(fsys, "m")
		if err != nil {
			t.Fatal(err)
		}
		return checkLayers(pkgs)
	}
	if v := check(mod); len(v) != 0 {
		t.Fatalf("clean module: %q", v)
	}
	// A package that reaches up, one without doc.go, a doc.go allowing a
	// package that does not exist, and one without its Imports line.
	mod["down/down.go"] = &fstest.MapFile{Data: []byte("package down\n\nimport \"m/up\"\n")}
	mod["side/side.go"] = &fstest.MapFile{Data: []byte("package side\n")}
	mod["up/doc.go"] = &fstest.MapFile{Data: []byte("// Package up.\n//\n// Imports: down, gone\npackage up\n")}
	mod["flat/doc.go"] = &fstest.MapFile{Data: []byte("// Package flat imports nothing.\npackage flat\n")}
	want := []string{
		`down/down.go imports up, which down/doc.go does not allow`,
		`flat/doc.go: no "// Imports:" line`,
		`side: no doc.go saying the package's job and what it may import`,
		`up/doc.go: allows gone, which is not a package of the module`,
	}
	if got := check(mod); !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
