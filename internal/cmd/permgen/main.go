// Command permgen writes the files generated from the NATS roles of
// internal/natsperm: the accounts of the NATS configurations under deploy/, the dev
// overlay's users and the table of users in docs/operations.md. `go generate
// ./internal/natsperm` runs it; internal/natsperm's TestGenerated fails while a
// checked-in file differs from what it writes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/skillbus/skillbus/internal/natsperm"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "permgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("permgen", flag.ContinueOnError)
	root := fs.String("root", ".", "the module's root directory")
	prefix := fs.String("prefix", "skillbus", "subject prefix of the roles")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	files := natsperm.Generated(natsperm.Roles(*prefix))
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(*root, name)
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		want, err := files[name](string(old))
		if err != nil {
			return err
		}
		if want == string(old) {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			return err
		}
		fmt.Println("permgen: wrote", name)
	}
	return nil
}
