//go:build race

package expr

// The race detector slows the interpreter down about eightfold.
const timeScale = 8
