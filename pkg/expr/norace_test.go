//go:build !race

package expr

const timeScale = 1
