package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// generateLine is how a package asks for jsongen.
const generateLine = "//go:generate go run "

// TestGeneratedFilesAreFresh runs jsongen as every //go:generate line of the
// module asks and compares its output with the checked-in file: a field added
// to a wire type without `make generate` fails here. Every generated file must
// also have its line.
func TestGeneratedFilesAreFresh(t *testing.T) {
	modDir, _, err := findModule(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	err = filepath.WalkDir(modDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); path != modDir && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if filepath.Base(path) == Output {
			checked[filepath.Dir(path)] = checked[filepath.Dir(path)] // seen; a line must claim it
			return nil
		}
		for line := range strings.SplitSeq(string(src), "\n") {
			rest, ok := strings.CutPrefix(line, generateLine)
			if !ok {
				continue
			}
			fields := strings.Fields(rest)
			if len(fields) == 0 || !strings.HasSuffix(fields[0], "internal/cmd/jsongen") {
				continue
			}
			dir := filepath.Dir(path)
			if checked[dir] {
				t.Errorf("%s: a second jsongen line in one package", path)
			}
			checked[dir] = true
			want, err := Generate(dir, fields[1:])
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			again, err := Generate(dir, fields[1:])
			if err != nil || !bytes.Equal(want, again) {
				t.Errorf("%s: jsongen's output differs from one run to the next", path)
			}
			got, err := os.ReadFile(filepath.Join(dir, Output))
			if err != nil {
				t.Errorf("%s: %v (run make generate)", path, err)
				continue
			}
			if !bytes.Equal(got, want) {
				rel, _ := filepath.Rel(modDir, dir)
				t.Errorf("%s is stale: run make generate (or go generate ./%s)", filepath.Join(rel, Output), rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(checked) == 0 {
		t.Fatal("no //go:generate line runs jsongen")
	}
	for dir, ok := range checked {
		if !ok {
			t.Errorf("%s has no //go:generate line for jsongen", filepath.Join(dir, Output))
		}
	}
}
