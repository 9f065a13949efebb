package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
)

// The README's tour, as written: `skillbus dev` started from the repository root
// with no --skills (as `./bin/skillbus dev --ui ...` is), then every
// `./bin/skillbus ...` line of the README's sh blocks, in order, against a fresh
// store, each checked for its exit code and a line of the output the README
// promises. <id> and <execution> are taken from the commands before them, as a
// reader would; the refund trigger waits for its confirmation, so it runs beside
// `runs list` and `runs confirm`, as in two terminals.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	inSh := false
	for _, line := range strings.Split(string(readme), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
		case strings.HasPrefix(line, "```"):
			inSh = false
		case inSh && strings.HasPrefix(line, "./bin/skillbus "):
			line, _, _ = strings.Cut(line, ";") // `; echo "exit $?"`: the exit code is checked
			line, _, _ = strings.Cut(line, "  #")
			cmds = append(cmds, shellWords(t, strings.TrimPrefix(line, "./bin/skillbus ")))
		}
	}
	if len(cmds) < 15 {
		t.Fatalf("only %d ./bin/skillbus commands in README.md's sh blocks", len(cmds))
	}

	// No --skills: from the repository root, dev finds the example skills.
	dev, port, _ := startDev(t, "--store", t.TempDir())
	if !strings.Contains(dev.out.String(), "using the example skills in ./testdata/skills") {
		t.Errorf("dev did not say where its skills came from:\n%s", dev.out.String())
	}
	url := "--nats-url=nats://127.0.0.1:" + strconv.Itoa(port)

	// What each command must print, by its first words (exit 0 unless said).
	want := []struct {
		prefix string
		code   int
		out    string
	}{
		{"skills list", 0, "hello"},
		{"trigger --skill hello", 0, `"greeting": "Hello, Ada!"`},
		{`trigger com.example.order.created --data {"order_id":"ORD-7"`, 0, "reserve-stock completed"},
		{`trigger com.example.order.created --data {"order_id":"ORD-8"`, 0, "falling back to queue-backorder"},
		{`trigger com.example.text.submitted --data {"text"`, 0, `"words": 3`},
		{`trigger com.example.text.submitted --data {}`, 1, "word-count failed"},
		{"dlq list", 0, "word-count"},
		{"dlq show", 0, "word-count"},
		{"dlq replay", 0, "published"},
		{"runs list", 0, "paused"},
		{"runs confirm", 0, "approved step"},
		{"runs show", 0, "completed"},
		{"skills validate", 0, ""},
		{"skills search order", 0, "reserve-stock"},
		{"skills show hello", 0, "hello"},
		{"route --skills", 0, ""},
		{"route eval", 0, ""},
	}
	check := func(args []string, out string, code int) {
		t.Helper()
		line := strings.Join(args, " ")
		for _, w := range want {
			if strings.HasPrefix(line, w.prefix) {
				if code != w.code || !strings.Contains(out, w.out) {
					t.Errorf("skillbus %s: exit %d, want %d and %q in:\n%s", line, code, w.code, w.out, out)
				}
				return
			}
		}
		if code != 0 {
			t.Errorf("skillbus %s: exit %d\n%s", line, code, out)
		}
	}
	var deadID, execution string
	var refund chan [2]any
	for _, args := range cmds {
		args = append([]string(nil), args...)
		for i, a := range args {
			switch a {
			case "<id>":
				args[i] = deadID
			case "<execution>":
				args[i] = execution
			}
		}
		if args[0] != "route" && !(args[0] == "skills" && args[1] == "validate") {
			args = append(args, url)
		}
		line := strings.Join(args, " ")
		switch {
		case strings.HasPrefix(line, "trigger com.example.refund.requested"):
			refund = make(chan [2]any, 1)
			go func() {
				out, code := skillbus(t, args...)
				refund <- [2]any{out, code}
			}()
			continue
		case strings.HasPrefix(line, "runs list") && refund != nil:
			var out string
			natstest.Eventually(t, 60*time.Second, func() bool {
				out, _ = skillbus(t, args...)
				return strings.Contains(out, "paused")
			}, "runs list shows no paused run:\n%s", out)
			m := regexp.MustCompile(`(?m)^([0-9a-f]{32})\s+refund-order\s+\S+\s+paused`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no paused refund-order in runs list:\n%s", out)
			}
			execution = m[1]
			check(args, out, 0)
			continue
		}
		out, code := skillbus(t, args...)
		check(args, out, code)
		if strings.HasPrefix(line, "dlq list") {
			js, _ := skillbus(t, "dlq", "list", "--json", url)
			var entries []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(js), &entries); err != nil || len(entries) == 0 {
				t.Fatalf("dlq list --json: %v\n%s", err, js)
			}
			deadID = entries[0].ID
		}
		if strings.HasPrefix(line, "runs confirm") {
			r := <-refund
			check([]string{"trigger", "com.example.refund.requested"}, r[0].(string), r[1].(int))
			if !strings.Contains(r[0].(string), "waiting for confirmation") || !strings.Contains(r[0].(string), "refund-order completed") {
				t.Errorf("the refund trigger did not wait and then complete:\n%s", r[0])
			}
		}
	}
}

// shellWords splits a command line as sh would for the README's commands: words,
// and single- or double-quoted strings.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in README command %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}
