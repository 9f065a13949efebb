//go:build !race

package natstest

const raceEnabled = false
