package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// idLen is the length of activation and execution ids in hex characters (128 bits).
const idLen = 32

// ActivationID names everything one trigger causes: the hash of the trigger's source
// and id. It is the correlation id of the activation.
//
// The source is hashed in its canonical form (CanonicalSource), so the same event
// gets the same id whichever binding or SDK carried it: one may write the source
// percent-encoded, another not.
func ActivationID(source, id string) string {
	return hash(CanonicalSource(source), id)
}

// AppendActivationID appends ActivationID(source, id) to b, for a caller that
// makes one string of the id and what follows it.
func AppendActivationID(b []byte, source, id string) []byte {
	return appendHash(b, CanonicalSource(source), id)
}

// ExecutionID names the execution of one skill for one trigger: the hash of the
// trigger's source and id and the skill's name, so a re-published trigger names the
// same execution and creates no second one.
func ExecutionID(source, id, skill string) string {
	return hash(CanonicalSource(source), id, skill)
}

// CanonicalSource is a CloudEvents source with its percent-encoded octets decoded:
// "/orders%20eu/caf%C3%A9" and "/orders eu/café" name the same source. The
// CloudEvents SDK re-encodes a source it parses as a URI; header bindings encode
// some characters and not others; this form is what they all agree on. A '%' not
// followed by two hex digits is kept.
func CanonicalSource(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func hash(parts ...string) string {
	var out [idLen]byte
	return string(appendHash(out[:0], parts...))
}

// appendHash appends the id of parts to dst.
func appendHash(dst []byte, parts ...string) []byte {
	// The parts, each length-prefixed so ("ab","c") and ("a","bc") differ, in a
	// buffer on the stack for the usual short ones: an id costs one allocation.
	var buf [256]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(b, byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p)))
		b = append(b, p...)
	}
	sum := sha256.Sum256(b)
	return hex.AppendEncode(dst, sum[:idLen/2])
}
