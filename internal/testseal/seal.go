package testseal

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// Sealer returns a seal and an open function for key.
func Sealer(key string) (seal func([]byte) []byte, open func([]byte) ([]byte, error)) {
	tag := func(b []byte) []byte { m := hmac.New(sha256.New, []byte(key)); m.Write(b); return m.Sum(nil) }
	seal = func(b []byte) []byte { return append(tag(b), b...) }
	open = func(b []byte) ([]byte, error) {
		if len(b) < sha256.Size || !hmac.Equal(b[:sha256.Size], tag(b[sha256.Size:])) {
			return nil, errors.New("not sealed by the cluster")
		}
		return b[sha256.Size:], nil
	}
	return seal, open
}
