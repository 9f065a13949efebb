package events

import (
	"crypto/sha256"
	"encoding/hex"
)

// idLen is the length of activation and execution ids in hex characters (128 bits).
const idLen = 32

// ActivationID names everything one trigger causes: the hash of the trigger's source
// and id. It is the correlation id of the activation.
func ActivationID(source, id string) string {
	return hash(source, id)
}

// ExecutionID names the execution of one skill for one trigger: the hash of the
// trigger's source and id and the skill's name (DESIGN §5.2).
func ExecutionID(source, id, skill string) string {
	return hash(source, id, skill)
}

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		// Length-prefix each part so ("ab","c") and ("a","bc") differ.
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))[:idLen]
}
