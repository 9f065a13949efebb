// Package secretenv takes a process's secrets out of its environment.
//
// A process that reads a password from an environment variable and calls
// os.Unsetenv still shows it in /proc/<pid>/environ: that file is the
// environment block the process was started with, which unsetenv does not touch.
// Take gets rid of the block itself: it starts the program again in the same
// process (execve of /proc/self/exe, so the pid, the parent and the open files
// stay) with the secrets removed from the environment, and hands them over
// through a pipe that the new image reads and closes at once.
//
// Call Take first thing in main, before anything else reads the environment or
// starts goroutines that matter:
//
//	secrets, err := secretenv.Take("SKILLBUS_NATS_PASSWORD", "SKILLBUS_LLM_API_KEY")
//	if err != nil { ... }
//	getenv := secretenv.Getenv(secrets) // secrets first, then os.Getenv
//go:build linux

package secretenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// FDVar is the variable that tells the started-again program which descriptor
// holds its secrets.
const FDVar = "SKILLBUS_SECRETS_FD"

// maxSize bounds the secrets, so that writing them never blocks on the pipe
// (whose buffer holds at least 64 KiB).
const maxSize = 60 << 10

// Take returns the values of the named variables that are set and not empty, and
// makes sure that they are in neither the process's environment nor its
// environment block. When some are set, the program is started again (see the
// package documentation) and Take returns in the new image; when none are, it
// returns an empty map at once.
func Take(names ...string) (map[string]string, error) {
	if fd, ok := os.LookupEnv(FDVar); ok {
		return receive(fd, names)
	}
	secrets := map[string]string{}
	size := 0
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			secrets[n] = v
			size += len(n) + len(v)
		}
	}
	if len(secrets) == 0 {
		return secrets, nil
	}
	if size > maxSize {
		return nil, fmt.Errorf("secretenv: the secrets are %d bytes, more than %d", size, maxSize)
	}
	b, err := json.Marshal(secrets)
	if err != nil {
		return nil, err
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("secretenv: pipe: %w", err)
	}
	r, w := p[0], p[1]
	if _, err := syscall.Write(w, b); err != nil {
		syscall.Close(r)
		syscall.Close(w)
		return nil, fmt.Errorf("secretenv: %w", err)
	}
	syscall.Close(w)
	// The read end, alone, survives execve.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(r), syscall.F_SETFD, 0); errno != 0 {
		syscall.Close(r)
		return nil, fmt.Errorf("secretenv: fcntl: %w", errno)
	}
	env := []string{FDVar + "=" + strconv.Itoa(r)}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, secret := secrets[k]; !secret && k != FDVar {
			env = append(env, kv)
		}
	}
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	syscall.Close(r)
	return nil, fmt.Errorf("secretenv: starting the program again without its secrets: %w", err)
}

func receive(fdText string, names []string) (map[string]string, error) {
	_ = os.Unsetenv(FDVar)
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("secretenv: %s=%q is not a descriptor", FDVar, fdText)
	}
	f := os.NewFile(uintptr(fd), "secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("secretenv: reading the secrets: %w", err)
	}
	secrets := map[string]string{}
	if err := json.Unmarshal(b, &secrets); err != nil {
		return nil, fmt.Errorf("secretenv: reading the secrets: %w", err)
	}
	for k := range secrets {
		if !contains(names, k) {
			return nil, errors.New("secretenv: the secrets handed over are not the ones asked for")
		}
	}
	return secrets, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Getenv returns a getenv that answers from secrets first, then from the
// environment.
func Getenv(secrets map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := secrets[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}
