package natsperm

//go:generate go run ../cmd/permgen -root ../..

import (
	"fmt"
	"strings"
)

// Markers around the generated table of users in docs/operations.md.
const (
	beginTable = "<!-- BEGIN nats-users -->\n"
	endTable   = "<!-- END nats-users -->"
)

// Generated are the files made from the roles, by path from the module's root:
// each turns the file's content now into what the roles make of it. `go generate
// ./internal/natsperm` writes them; a test fails while one is out of date.
func Generated(roles []Role) map[string]func(old string) (string, error) {
	accounts := func(string) (string, error) { return Accounts(roles), nil }
	return map[string]func(old string) (string, error){
		"deploy/base/nats-accounts.conf":     accounts,
		"deploy/nats/nats-accounts.conf":     accounts,
		"deploy/overlays/dev/nats-users.env": func(string) (string, error) { return DevSecret(roles), nil },
		"docs/operations.md": func(old string) (string, error) {
			i, j := strings.Index(old, beginTable), strings.Index(old, endTable)
			if i < 0 || j < i {
				return "", fmt.Errorf("docs/operations.md lacks the markers %q and %q", beginTable, endTable)
			}
			return old[:i+len(beginTable)] + Markdown(roles) + old[j:], nil
		},
	}
}
