package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A file:// store is a folder, written by gocloud's fileblob driver, which
// needs four things it does not do by itself (all found in review):
//
//   - It writes each object to a temporary file in os.TempDir and renames
//     it into place, which fails ("invalid cross-device link") for every
//     upload when the folder is on another file system than /tmp: a
//     backup disk, the very place a backup should go. So Open asks for
//     temporary files beside the objects (no_tmp_dir), unless the URL says
//     otherwise.
//   - It never syncs. The manifest vouches for data that, after a power
//     cut, could be empty, and pruning has already deleted the older
//     backups on its word. So each object written is synced, with its
//     attributes file and the folders up to the store's, before the next
//     step: the data before its manifest is written, the manifest before
//     pruning.
//   - A process killed mid-write leaves its temporary file beside the
//     objects, where nothing lists it as a backup. Pruning deletes those
//     older than OrphanGrace.
//   - It writes an attributes file beside each object (rewritten in
//     place, neither atomically nor synced, when an object is written
//     again) and reads it before the object; one left empty by a power
//     cut stopped listing and restoring. The store uses no attributes, so
//     Open asks for none to be written (metadata=skip), and a read that
//     fails on one already there is ErrCorrupt, naming it (readObject).

// fileStoreURL returns rawURL with temporary files kept beside the
// objects and no attributes files written, and the folder a file:// URL
// names, absolute, as fileblob reads it: the host "." makes the path
// relative to the working folder (file://./backups). Found in review:
// taken as /backups, the folder synced was not the one written, and
// every upload to a relative URL failed after writing its data.
func fileStoreURL(u *url.URL) (rawURL, dir string, err error) {
	c := *u
	q := c.Query()
	if q.Get("no_tmp_dir") == "" {
		q.Set("no_tmp_dir", "true")
	}
	if q.Get("metadata") == "" {
		q.Set("metadata", "skip")
	}
	c.RawQuery = q.Encode()
	path := u.Path
	if u.Host == "." || os.PathSeparator != '/' {
		path = strings.TrimPrefix(path, "/")
	}
	dir, err = filepath.Abs(filepath.FromSlash(path))
	if err != nil {
		return "", "", fmt.Errorf("backup: the folder of %s: %w", redact(u), err)
	}
	return c.String(), dir, nil
}

// checkFolderURL refuses the file URLs whose folder is not the one they
// seem to name (found in review). fileblob takes the URL's path alone,
// made absolute from the working folder, and so does fileStoreURL: it
// ignores any host but ".", so file://var/backups is /backups, not
// /var/backups nor ./var/backups; and an opaque URL has no path, so
// file:backups is the working folder itself, not ./backups in it. Each
// has two readings an operator could mean: refused, naming both
// spellings that say one.
func checkFolderURL(u *url.URL) error {
	var seems string
	switch {
	case u.Opaque != "":
		seems = u.Opaque
	case u.Host != "" && u.Host != "." && u.Host != "localhost":
		seems = u.Host + u.Path
	default:
		return nil
	}
	seems = strings.TrimPrefix(strings.TrimPrefix(seems, "./"), "/")
	abs := "/" + seems
	if seems == "" || strings.HasPrefix(seems, "..") {
		abs = "/absolute/path"
	}
	return fmt.Errorf("%w: %s is read as %s, not the one it seems to name: write file://%s for an absolute path, or file://./%s for one relative to the working folder",
		ErrConfig, redact(u), fileblobFolder(u), abs, seems)
}

// fileblobFolder is the folder fileblob opens for u, for messages.
func fileblobFolder(u *url.URL) string {
	path := u.Path
	if u.Host == "." {
		path = strings.TrimPrefix(path, "/")
	}
	if path == "" {
		return "the working folder itself"
	}
	return "the folder " + path
}

// checkFolderPrefix refuses a prefix that fileblob would escape on disk:
// the store syncs each object at the path its key names.
func checkFolderPrefix(prefix string) error {
	for _, r := range prefix {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == '/':
		default:
			return fmt.Errorf("%w: prefix %q: a file:// store takes letters, digits and - _ . / only", ErrConfig, prefix)
		}
	}
	for part := range strings.SplitSeq(strings.TrimSuffix(prefix, "/"), "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%w: prefix %q: want a relative path without . or .. or empty parts", ErrConfig, prefix)
		}
	}
	return nil
}

// syncPath makes what was written at path durable; tests replace it to
// see the order of syncs.
var syncPath = func(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// attrsExt is the suffix of fileblob's attributes file beside an object.
const attrsExt = ".attrs"

// damagedAttrs returns an ErrCorrupt error if readErr, from reading key
// in a file:// store, came from its attributes file, which fileblob
// reads first and which does not decode; else nil.
func (s *Store) damagedAttrs(key string, readErr error) error {
	if s.dir == "" || readErr == nil {
		return nil
	}
	path := filepath.Join(s.dir, filepath.FromSlash(key)) + attrsExt
	b, err := os.ReadFile(path)
	if err != nil {
		return nil // none, or unreadable: the read's own error says more
	}
	var attrs map[string]any
	if err := json.Unmarshal(b, &attrs); err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s, the attributes file fileblob reads before %s, is damaged (%d bytes that do not decode); the object may be whole: "+
		"this version writes no such files, so delete it and read again", ErrCorrupt, path, key, len(b))
}

// syncWritten makes the object at key durable in a file:// store (a
// no-op for the others): the file, its attributes file if there is one,
// and every folder from its own up to the store's, whose entries the
// rename and any folder made for it changed.
func (s *Store) syncWritten(key string) error {
	if s.dir == "" {
		return nil
	}
	path := filepath.Join(s.dir, filepath.FromSlash(key))
	if err := syncPath(path); err != nil {
		return fmt.Errorf("backup: syncing %s: %w", path, err)
	}
	if err := syncPath(path + attrsExt); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: syncing %s: %w", path+attrsExt, err)
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if err := syncPath(d); err != nil {
			return fmt.Errorf("backup: syncing folder %s: %w", d, err)
		}
		if d == s.dir || len(d) <= len(s.dir) {
			return nil
		}
	}
}

// tempSuffix ends the name of fileblob's temporary files.
const tempSuffix = ".tmp"

// sweepTemps deletes the temporary files under dir of a file:// store
// written before cutoff: a writer killed mid-write left them.
func (s *Store) sweepTemps(ctx context.Context, dir string, cutoff time.Time) error {
	if s.dir == "" {
		return nil
	}
	root := filepath.Join(s.dir, filepath.FromSlash(s.opts.Prefix+dir))
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: reading %s: %w", root, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), tempSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue // gone meanwhile, or an upload under way
		}
		if err := os.Remove(filepath.Join(root, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("backup: deleting a leftover temporary file: %w", err)
		}
	}
	return ctx.Err()
}
