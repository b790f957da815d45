//go:build tools

// Package parca pins the Parca server that tests/integration/test_parca.py pushes to:
// go.mod requires github.com/parca-dev/parca at an exact version (the newest the Go
// module proxy serves here) and go.sum holds every module's hash, so build.sh builds the
// same binary everywhere without asking the checksum database.
package parca

import _ "github.com/parca-dev/parca/cmd/parca"
