//go:build linux

package secretenv_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/secretenv"
)

// TestMain plays the program that takes its secrets when SECRETENV_TEST is set:
// it prints what it got, its pid and its environment block.
func TestMain(m *testing.M) {
	if os.Getenv("SECRETENV_TEST") == "" {
		os.Exit(m.Run())
	}
	secrets, err := secretenv.Take("TEST_PASSWORD", "TEST_KEY", "TEST_UNSET")
	out := map[string]any{"secrets": secrets, "pid": os.Getpid()}
	if err != nil {
		out["error"] = err.Error()
	}
	block, _ := os.ReadFile("/proc/self/environ")
	out["environ"] = string(block)
	out["getenv"] = os.Getenv("TEST_PASSWORD")
	_ = json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(0)
}

func TestTakeRemovesSecretsFromTheEnvironmentBlock(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"SECRETENV_TEST=1", "TEST_PASSWORD=hunter2", "TEST_KEY=sk-123", "TEST_EMPTY=", "OTHER=kept"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got struct {
		Secrets map[string]string `json:"secrets"`
		Pid     int               `json:"pid"`
		Environ string            `json:"environ"`
		Getenv  string            `json:"getenv"`
		Error   string            `json:"error"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Error != "" {
		t.Fatal(got.Error)
	}
	if got.Secrets["TEST_PASSWORD"] != "hunter2" || got.Secrets["TEST_KEY"] != "sk-123" || len(got.Secrets) != 2 {
		t.Errorf("secrets %v", got.Secrets)
	}
	if got.Pid != cmd.Process.Pid {
		t.Errorf("the program ran again as pid %d, not in the same process %d", got.Pid, cmd.Process.Pid)
	}
	for _, s := range []string{"hunter2", "sk-123"} {
		if strings.Contains(got.Environ, s) {
			t.Errorf("the environment block still holds %q: %q", s, got.Environ)
		}
	}
	if !strings.Contains(got.Environ, "OTHER=kept") || got.Getenv != "" {
		t.Errorf("environment block %q, getenv %q", got.Environ, got.Getenv)
	}
}

func TestTakeWithoutSecrets(t *testing.T) {
	t.Setenv("TEST_PASSWORD", "")
	secrets, err := secretenv.Take("TEST_PASSWORD")
	if err != nil || len(secrets) != 0 {
		t.Errorf("secrets %v, error %v", secrets, err)
	}
	if secretenv.Getenv(map[string]string{"A": "secret"})("A") != "secret" {
		t.Error("Getenv does not answer from the secrets")
	}
}

func TestTakeRejectsABadDescriptor(t *testing.T) {
	t.Setenv(secretenv.FDVar, "nope")
	if _, err := secretenv.Take("X"); err == nil || !strings.Contains(err.Error(), "is not a descriptor") {
		t.Errorf("error %v", err)
	}
}
