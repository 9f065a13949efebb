//go:build race

package natstest

const raceEnabled = true
