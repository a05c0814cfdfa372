// Command tlogcheck is an independent checker of git forum's standard proofs, built only on Go's
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog. git forum's tests build and run it.
//
//	tlogcheck proofs VKEY [-mutate] < MANIFEST
//	    MANIFEST lines: "inclusion FILE ENTRYHASH" or "consistency FILE".
//	    Each proof must be accepted; with -mutate, every single-byte change of it must be refused.
//	tlogcheck tiles VKEY DIR ENTRIES
//	    DIR holds a C2SP tlog-tiles layout (checkpoint, tile/L/N[.p/W]); ENTRIES one entry hash
//	    (hex) a line. Every entry's inclusion and every smaller size's consistency is proved from
//	    the tiles alone and checked.
//
// It prints one line and exits 0 when everything held, 1 otherwise.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// cutPrefix is strings.CutPrefix, which Go 1.19 lacks.
func cutPrefix(s, p string) (string, bool) {
	if strings.HasPrefix(s, p) {
		return s[len(p):], true
	}
	return s, false
}

func cutPrefixB(s, p []byte) ([]byte, bool) {
	if bytes.HasPrefix(s, p) {
		return s[len(p):], true
	}
	return s, false
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// strictB64 decodes only the canonical spelling, so no changed character decodes to equal bytes.
func strictB64(s string) ([]byte, error) {
	return base64.StdEncoding.Strict().DecodeString(s)
}

func parseHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := strictB64(s)
	if err != nil || len(b) != tlog.HashSize {
		return h, fmt.Errorf("bad hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// openNote opens a signed checkpoint note with the trusted key and reads its body.
func openNote(msg []byte, v note.Verifiers) (checkpoint, error) {
	var c checkpoint
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return c, errors.New("not a note")
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(msg[i+2:]), "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return c, errors.New("bad signature line")
		}
		if _, err := strictB64(f[2]); err != nil {
			return c, errors.New("signature not canonical base64")
		}
	}
	n, err := note.Open(msg, v)
	if err != nil {
		return c, err
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 3 {
		return c, errors.New("short checkpoint")
	}
	c.origin = lines[0]
	c.size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || c.size < 1 || strconv.FormatInt(c.size, 10) != lines[1] {
		return c, errors.New("bad size")
	}
	c.root, err = parseHash(lines[2])
	return c, err
}

func entryLeaf(hexHash string) (tlog.Hash, error) {
	b, err := hex.DecodeString(hexHash)
	if err != nil || len(b) != 32 {
		return tlog.Hash{}, fmt.Errorf("bad entry hash %q", hexHash)
	}
	return tlog.RecordHash(b), nil
}

// takeNote splits one whole note off the front of s.
func takeNote(s []byte) ([]byte, []byte, error) {
	i := bytes.Index(s, []byte("\n\n"))
	if i < 0 {
		return nil, nil, errors.New("no note")
	}
	end := i + 2
	for bytes.HasPrefix(s[end:], []byte("— ")) {
		j := bytes.IndexByte(s[end:], '\n')
		if j < 0 {
			return nil, nil, errors.New("unterminated signature")
		}
		end += j + 1
	}
	if end == i+2 {
		return nil, nil, errors.New("unsigned note")
	}
	return s[:end], s[end:], nil
}

func hashLines(lines []string) ([]tlog.Hash, error) {
	var out []tlog.Hash
	for _, l := range lines {
		h, err := parseHash(l)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func checkInclusion(data []byte, entry string, v note.Verifiers) error {
	rest, ok := cutPrefixB(data, []byte("c2sp.org/tlog-proof@v1\n"))
	if !ok {
		return errors.New("no tlog-proof header")
	}
	i := bytes.Index(rest, []byte("\n\n"))
	if i < 0 {
		return errors.New("no empty line")
	}
	lines := strings.Split(string(rest[:i]), "\n")
	idx, ok := cutPrefix(lines[0], "index ")
	if !ok {
		return errors.New("no index line")
	}
	n, err := strconv.ParseInt(idx, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != idx {
		return errors.New("bad index")
	}
	path, err := hashLines(lines[1:])
	if err != nil {
		return err
	}
	c, err := openNote(rest[i+2:], v)
	if err != nil {
		return err
	}
	leaf, err := entryLeaf(entry)
	if err != nil {
		return err
	}
	return tlog.CheckRecord(path, c.size, c.root, n, leaf)
}

func checkConsistency(data []byte, v note.Verifiers) error {
	rest, ok := cutPrefixB(data, []byte("git-forum tlog-consistency v1\n"))
	if !ok {
		return errors.New("no consistency header")
	}
	i := bytes.Index(rest, []byte("\n\n"))
	if i < 0 {
		return errors.New("no empty line")
	}
	lines := strings.Split(string(rest[:i]), "\n")
	if len(lines) < 2 {
		return errors.New("short proof")
	}
	num := func(l, key string) (int64, error) {
		s, ok := cutPrefix(l, key)
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || strconv.FormatInt(n, 10) != s {
			return 0, errors.New("bad " + key)
		}
		return n, nil
	}
	oldN, err := num(lines[0], "old ")
	if err != nil {
		return err
	}
	newN, err := num(lines[1], "new ")
	if err != nil {
		return err
	}
	path, err := hashLines(lines[2:])
	if err != nil {
		return err
	}
	oldNote, newNote, err := takeNote(rest[i+2:])
	if err != nil {
		return err
	}
	oc, err := openNote(oldNote, v)
	if err != nil {
		return err
	}
	nc, err := openNote(newNote, v)
	if err != nil {
		return err
	}
	if oc.origin != nc.origin || oc.size != oldN || nc.size != newN {
		return errors.New("notes do not match the proof")
	}
	return tlog.CheckTree(path, nc.size, nc.root, oc.size, oc.root)
}

type dirTiles struct{ dir string }

func (d dirTiles) Height() int { return 8 }

// ReadTiles reads the C2SP layout: Go's tile path without its height component.
func (d dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	var out [][]byte
	for _, t := range tiles {
		p := strings.TrimPrefix(t.Path(), "tile/8/")
		b, err := os.ReadFile(filepath.Join(d.dir, "tile", filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (d dirTiles) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func checkTiles(dir, entriesFile string, v note.Verifiers) (string, error) {
	msg, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		return "", err
	}
	c, err := openNote(msg, v)
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(entriesFile)
	if err != nil {
		return "", err
	}
	entries := strings.Fields(string(raw))
	if int64(len(entries)) != c.size {
		return "", fmt.Errorf("checkpoint size %d, %d entries given", c.size, len(entries))
	}
	r := tlog.TileHashReader(tlog.Tree{N: c.size, Hash: c.root}, dirTiles{dir})
	th, err := tlog.TreeHash(c.size, r)
	if err != nil || th != c.root {
		return "", fmt.Errorf("tree hash from tiles: %v", err)
	}
	for n, e := range entries {
		p, err := tlog.ProveRecord(c.size, int64(n), r)
		if err != nil {
			return "", fmt.Errorf("prove record %d: %v", n, err)
		}
		leaf, err := entryLeaf(e)
		if err != nil {
			return "", err
		}
		if err := tlog.CheckRecord(p, c.size, c.root, int64(n), leaf); err != nil {
			return "", fmt.Errorf("record %d: %v", n, err)
		}
	}
	for m := int64(1); m < c.size; m++ {
		p, err := tlog.ProveTree(c.size, m, r)
		if err != nil {
			return "", fmt.Errorf("prove tree %d: %v", m, err)
		}
		old, err := tlog.TreeHash(m, r)
		if err != nil {
			return "", err
		}
		if err := tlog.CheckTree(p, c.size, c.root, m, old); err != nil {
			return "", fmt.Errorf("tree %d: %v", m, err)
		}
	}
	return fmt.Sprintf("ok: %d records and %d consistency proofs from tiles of %s", c.size, c.size-1, c.origin), nil
}

func fail(format string, a ...interface{}) {
	fmt.Printf("FAIL: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: tlogcheck proofs VKEY [-mutate] < MANIFEST | tlogcheck tiles VKEY DIR ENTRIES")
	}
	ver, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fail("verifier key: %v", err)
	}
	v := note.VerifierList(ver)
	switch os.Args[1] {
	case "tiles":
		if len(os.Args) != 5 {
			fail("usage: tlogcheck tiles VKEY DIR ENTRIES")
		}
		msg, err := checkTiles(os.Args[3], os.Args[4], v)
		if err != nil {
			fail("%v", err)
		}
		fmt.Println(msg)
	case "proofs":
		mutate := len(os.Args) > 3 && os.Args[3] == "-mutate"
		accepted, refused := 0, 0
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			data, err := os.ReadFile(f[1])
			if err != nil {
				fail("%v", err)
			}
			check := func(b []byte) error {
				switch {
				case f[0] == "inclusion" && len(f) == 3:
					return checkInclusion(b, f[2], v)
				case f[0] == "consistency":
					return checkConsistency(b, v)
				}
				return errors.New("bad manifest line")
			}
			if err := check(data); err != nil {
				fail("%s %s refused: %v", f[0], f[1], err)
			}
			accepted++
			if !mutate {
				continue
			}
			for i := range data {
				changed := append([]byte(nil), data...)
				changed[i] ^= 0x01
				if check(changed) == nil {
					fail("%s %s accepted with byte %d changed from %q to %q", f[0], f[1], i, data[i], changed[i])
				}
				refused++
			}
		}
		fmt.Printf("ok: %d proofs accepted, %d single-byte changes refused\n", accepted, refused)
	default:
		fail("unknown mode %q", os.Args[1])
	}
}
