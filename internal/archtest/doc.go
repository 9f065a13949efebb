// Package archtest holds tests of the module's package graph: which packages
// may import which, and that docs/architecture.md maps every one. It has no code
// of its own.
package archtest
