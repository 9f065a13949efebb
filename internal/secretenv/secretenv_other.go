//go:build !linux

package secretenv

import "os"

// FDVar is the variable that tells the started-again program which descriptor
// holds its secrets (Linux only).
const FDVar = "SKILLBUS_SECRETS_FD"

// Take returns the values of the named variables that are set and not empty and
// unsets them. Outside Linux the program is not started again, so the process's
// original environment block keeps them.
func Take(names ...string) (map[string]string, error) {
	secrets := map[string]string{}
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			secrets[n] = v
			_ = os.Unsetenv(n)
		}
	}
	return secrets, nil
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
