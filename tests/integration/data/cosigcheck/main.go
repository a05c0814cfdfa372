// Command cosigcheck is an independent checker of git forum's witness cosignatures (C2SP
// tlog-cosignature/v1), written from the spec on Go's standard library and
// golang.org/x/mod/sumdb/note. The x/mod note package knows only signature type 0x01, so the
// type-0x04 verifier is written here: key ID SHA-256(name || "\n" || 0x04 || key)[:4], signature
// u64 big-endian timestamp || Ed25519 over "cosignature/v1\ntime T\n" || note text.
//
//	cosigcheck LOGVKEY COSIGVKEY [-mutate] < NOTE
//
// The note must open with both keys (the log's signature and the cosignature verified); with
// -mutate, every single-byte change of the cosignature line must be refused. It prints the
// cosignature's timestamp and exits 0 when everything held, 1 otherwise.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
	time uint64
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }
func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	if t > 1<<63-1 {
		return false
	}
	m := append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), msg...)
	if !ed25519.Verify(v.key, m, sig[8:]) {
		return false
	}
	v.time = t
	return true
}

func newCosigVerifier(vkey string) (*cosigVerifier, error) {
	f := strings.SplitN(vkey, "+", 3)
	if len(f) != 3 || len(f[1]) != 8 {
		return nil, fmt.Errorf("malformed cosignature key")
	}
	h, err := strconv.ParseUint(f[1], 16, 32)
	if err != nil {
		return nil, err
	}
	k, err := base64.StdEncoding.Strict().DecodeString(f[2])
	if err != nil || len(k) != 33 || k[0] != 0x04 {
		return nil, fmt.Errorf("not an Ed25519 cosignature key (type 0x04)")
	}
	s := sha256.New()
	s.Write([]byte(f[0] + "\n"))
	s.Write(k)
	if binary.BigEndian.Uint32(s.Sum(nil)[:4]) != uint32(h) {
		return nil, fmt.Errorf("key ID does not match")
	}
	return &cosigVerifier{name: f[0], hash: uint32(h), key: ed25519.PublicKey(k[1:])}, nil
}

// check opens msg and reports whether both the log's and the cosigner's signatures verified.
// Go's decoder is lenient about the spare bits of the last base64 character, so each signature
// line must also be canonical base64, as git forum's own reader insists.
func check(msg []byte, log note.Verifier, cv *cosigVerifier) bool {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return false
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(msg[i+2:]), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return false
		}
		if _, err := base64.StdEncoding.Strict().DecodeString(f[2]); err != nil {
			return false
		}
	}
	n, err := note.Open(msg, note.VerifierList(log, cv))
	if err != nil {
		return false
	}
	names := map[string]bool{}
	for _, s := range n.Sigs {
		names[s.Name] = true
	}
	return names[log.Name()] && names[cv.name] && len(n.Sigs) == 2
}

func fail(format string, a ...interface{}) {
	fmt.Printf(format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: cosigcheck LOGVKEY COSIGVKEY [-mutate] < NOTE")
	}
	log, err := note.NewVerifier(os.Args[1])
	if err != nil {
		fail("log key: %v", err)
	}
	cv, err := newCosigVerifier(os.Args[2])
	if err != nil {
		fail("cosignature key: %v", err)
	}
	msg, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		fail("read: %v", err)
	}
	if !check(msg, log, cv) {
		fail("the cosigned note does not open with both keys")
	}
	t := cv.time
	if len(os.Args) > 3 && os.Args[3] == "-mutate" {
		start := bytes.LastIndex(msg, []byte("\u2014 "+cv.name+" "))
		if start < 0 {
			fail("no cosignature line")
		}
		for i := start; i < len(msg)-1; i++ {
			for _, bit := range []byte{0x01, 0x20} {
				m := append([]byte(nil), msg...)
				m[i] ^= bit
				if check(m, log, cv) {
					fail("byte %d changed (^%#x) still verifies", i, bit)
				}
			}
		}
	}
	fmt.Printf("ok: cosigned at %d\n", t)
}
