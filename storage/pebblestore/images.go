package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"

	"paxcron/paxos"
	"paxcron/storage"
)

// A snapshot's image lives in a file of its own in the store's images
// folder, not in the database: the database holds its header, which
// names the file (storage.SnapshotHeader.File). An image written through
// the database went through its WAL, so the sync of every batch of
// appends after it waited for the whole image to reach the disk (a
// save of 128-512 ms, against 1-8 ms for a batch of appends, in the
// etcd comparison), and its memtables flushed and compacted the image
// again. In a file it is written and synced once, by whoever stages it
// (StageSnapshot), while appends go on; the Save that stores the
// snapshot then writes only its header and the log's truncation.
//
// Files are numbered in the order the store creates them, past every
// one in the folder when it opened, and never written twice: a file is
// created, filled, synced, and its name made durable before any header
// names it, so the header's commit is the one
// step that makes a snapshot the store's. A file no header names (a
// staged snapshot never stored, one superseded, one cut short by a
// crash) is deleted by the Save that supersedes it or by the next Open.
//
// A file is a sequence of frames, one per chunk of the image, in order:
//
//	4 bytes    the length of the record that follows, little-endian
//	n bytes    the chunk's record (storage.Codec.AppendSnapshotChunk),
//	           checksummed and naming its snapshot's index and its number
//
// and nothing after the last. The header says how many chunks and bytes
// there are; a reader that finds anything else reports corruption.
const (
	imagesDirName    = "snapshots"
	imageFilePrefix  = "image-"
	frameLengthBytes = 4
	// maxFrameRecordBytes bounds a frame's length on read: the largest
	// chunk and a generous allowance for its record's framing.
	maxFrameRecordBytes = storage.MaxSnapshotChunkBytes + 64
)

// maxCountedImageFile bounds the file numbers Open numbers new files
// past: far more files than a store ever creates.
const maxCountedImageFile = 1 << 62

func imageFileName(n uint64) string { return imageFilePrefix + strconv.FormatUint(n, 10) }

// parseImageFileName returns the number of an image file's name; ok is
// false for any other name.
func parseImageFileName(name string) (n uint64, ok bool) {
	digits, found := strings.CutPrefix(name, imageFilePrefix)
	if !found || digits == "" || (digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// stagedImage is an image written and synced ahead of the Save that
// stores its snapshot.
type stagedImage struct {
	header storage.SnapshotHeader // names the file
	// data is the image staged: a Save of a snapshot at the same index
	// with this very image (not a copy) uses the file.
	data *byte
}

func (st stagedImage) isImageOf(snap paxos.Snapshot) bool {
	return st.header.Meta.Index == snap.Meta.Index && st.header.Size == uint64(len(snap.Data)) &&
		st.data == unsafe.SliceData(snap.Data)
}

// StageSnapshot implements storage.SnapshotStager: it writes snap's
// image to a new file and syncs it, without holding the store's lock,
// so that Saves and reads go on meanwhile. A Save of snap (the same
// image, not a copy) then writes only its header. The image of a
// snapshot at index 0 or with no data is not staged (its Save writes
// none).
func (s *Store) StageSnapshot(snap paxos.Snapshot) error {
	s.mu.RLock()
	err, stored, saves := s.err, s.snapIndex, s.snapshotSaves
	if err == nil {
		s.busy.Add(1)
	}
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	defer s.busy.Done()
	if snap.Meta.Index < stored {
		return fmt.Errorf("%w: staging a snapshot at index %d, below the stored one at %d",
			storage.ErrInvalid, snap.Meta.Index, stored)
	}
	if len(snap.Data) == 0 {
		return nil
	}
	s.stageMu.Lock()
	file := s.nextFile
	s.nextFile++
	s.stageMu.Unlock()
	h, err := s.writeImage(file, snap)
	if err == nil && s.testHookImageStaging != nil {
		s.testHookImageStaging()
	}
	if err != nil {
		s.removeImage(file)
		return fmt.Errorf("storage: pebblestore: writing the image of the snapshot at index %d: %w", snap.Meta.Index, err)
	}
	// A Save of a snapshot at or above this one while the image was
	// written already dropped the staged images it made useless, before
	// this one was staged: it is dropped here, or it would stay until
	// the next snapshot's Save or Open (found in review). Under mu's read
	// side, no Save runs between the check and the staging.
	s.mu.RLock()
	s.stageMu.Lock()
	superseded := s.snapshotSaves != saves && s.snapIndex >= snap.Meta.Index
	old, had := s.staged[snap.Meta.Index]
	if superseded {
		had = false
	} else {
		s.staged[snap.Meta.Index] = stagedImage{header: h, data: unsafe.SliceData(snap.Data)}
	}
	s.stageMu.Unlock()
	s.mu.RUnlock()
	switch {
	case superseded:
		s.removeImage(file)
	case had:
		s.removeImage(old.header.File)
	}
	return nil
}

// takeStaged returns (and forgets) the staged image of snap, if any.
func (s *Store) takeStaged(snap paxos.Snapshot) (stagedImage, bool) {
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	st, ok := s.staged[snap.Meta.Index]
	if !ok || !st.isImageOf(snap) {
		return stagedImage{}, false
	}
	delete(s.staged, snap.Meta.Index)
	return st, true
}

// stagedThrough forgets the staged images of snapshots at or below index
// (a snapshot at index is stored: they will never be) and returns their
// files.
func (s *Store) stagedThrough(index uint64) []uint64 {
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	var files []uint64
	for i, st := range s.staged {
		if i <= index {
			files = append(files, st.header.File)
			delete(s.staged, i)
		}
	}
	return files
}

// writeImage writes snap's image to image file number file, syncs it and
// its name, and returns the header that names it.
func (s *Store) writeImage(file uint64, snap paxos.Snapshot) (h storage.SnapshotHeader, err error) {
	f, err := s.fs.Create(s.imagePath(file), vfs.WriteCategoryUnspecified)
	if err != nil {
		return h, err
	}
	defer func() {
		if f != nil {
			err = errors.Join(err, f.Close())
		}
	}()
	c := storage.NewCodec()
	size := uint64(len(snap.Data))
	chunkBytes := uint64(s.chunkBytes)
	h = storage.SnapshotHeader{Meta: snap.Meta, Size: size, Chunks: (size + chunkBytes - 1) / chunkBytes, File: file}
	frame := make([]byte, 0, frameLengthBytes+min(s.chunkBytes, len(snap.Data))+batchRecordOverhead)
	for n := range h.Chunks {
		data := snap.Data[n*chunkBytes : min((n+1)*chunkBytes, size)]
		frame = c.AppendSnapshotChunk(append(frame[:0], 0, 0, 0, 0), snap.Meta.Index, n, data)
		binary.LittleEndian.PutUint32(frame, uint32(len(frame)-frameLengthBytes))
		if _, err := f.Write(frame); err != nil {
			return h, err
		}
	}
	if err := f.Sync(); err != nil {
		return h, err
	}
	err, f = f.Close(), nil
	if err != nil {
		return h, err
	}
	return h, syncDir(s.fs, s.imagesDir)
}

func (s *Store) imagePath(file uint64) string { return s.fs.PathJoin(s.imagesDir, imageFileName(file)) }

// removeImage deletes an image file no header names. A failure costs only
// disk space until the next Open deletes it, so it is logged, not
// returned: the write that superseded the file has succeeded.
func (s *Store) removeImage(file uint64) {
	if err := s.fs.Remove(s.imagePath(file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logger.Errorf("storage: pebblestore: deleting the unused snapshot image %s: %v", s.imagePath(file), err)
	}
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// openImages creates the images folder (durably: a header may name a
// file in it as soon as Open returns), deletes every image file but the
// stored snapshot's, and numbers new files past every one seen.
func (s *Store) openImages(dir string) error {
	s.imagesDir = s.fs.PathJoin(dir, imagesDirName)
	if err := s.fs.MkdirAll(s.imagesDir, 0o700); err != nil {
		return fmt.Errorf("storage: pebblestore: creating %s: %w", s.imagesDir, err)
	}
	if err := syncDir(s.fs, dir); err != nil {
		return fmt.Errorf("storage: pebblestore: syncing %s: %w", dir, err)
	}
	names, err := s.fs.List(s.imagesDir)
	if err != nil {
		return fmt.Errorf("storage: pebblestore: listing %s: %w", s.imagesDir, err)
	}
	// Number past every file present, except numbers no store reaches by
	// counting (a stray or damaged name): numbering past 2^64-2 wrapped
	// to file 0, which no header can name, and the Save that stored it
	// panicked. New files cannot collide with such a number.
	s.nextFile = 1
	if s.snapFile < maxCountedImageFile {
		s.nextFile = s.snapFile + 1
	}
	for _, name := range names {
		n, ok := parseImageFileName(name)
		if !ok {
			continue // not ours
		}
		if n < maxCountedImageFile {
			s.nextFile = max(s.nextFile, n+1)
		}
		if n != s.snapFile && !s.snapFileUnknown {
			s.removeImage(n)
		}
	}
	return nil
}

// readImage reads and joins the image h describes from f, its file: one
// chunk at a time into an image allocated whole once, as readChunks does.
func readImage(f vfs.File, c *storage.Codec, h storage.SnapshotHeader) ([]byte, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: snapshot at index %d: image file %s: %s", storage.ErrCorrupt, h.Meta.Index, imageFileName(h.File), fmt.Sprintf(format, args...))
	}
	// Chunks are stored as they are, so the file is at least as long as
	// the image: a header that says more (its checksum valid, its writer
	// wrong) is refused before the image is allocated.
	if info, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("storage: pebblestore: snapshot at index %d: image file %s: %w", h.Meta.Index, imageFileName(h.File), err)
	} else if size := info.Size(); size < 0 || uint64(size) < h.Size {
		return nil, corrupt("it holds %d bytes, its header says the image alone is %d", size, h.Size)
	}
	data := make([]byte, 0, h.Size)
	var prefix [frameLengthBytes]byte
	var rec []byte
	for n := range h.Chunks {
		if _, err := io.ReadFull(f, prefix[:]); err != nil {
			return nil, readError(err, corrupt("it ends before chunk %d of %d", n, h.Chunks))
		}
		length := binary.LittleEndian.Uint32(prefix[:])
		if length > maxFrameRecordBytes {
			return nil, corrupt("chunk %d is %d bytes long, more than a chunk can be", n, length)
		}
		rec = append(rec[:0], make([]byte, length)...)
		if _, err := io.ReadFull(f, rec); err != nil {
			return nil, readError(err, corrupt("it ends inside chunk %d", n))
		}
		var err error
		if data, err = appendChunk(c, data, h, n, rec); err != nil {
			return nil, err
		}
	}
	if err := checkWhole(h, h.Chunks, data); err != nil {
		return nil, err
	}
	if n, err := f.Read(prefix[:1]); n != 0 || (err != nil && !errors.Is(err, io.EOF)) {
		return nil, readError(err, corrupt("bytes follow its last chunk"))
	}
	return data, nil
}

// readError tells a file cut short (corruption) from a failing read.
func readError(err, short error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return short
	}
	return fmt.Errorf("storage: pebblestore: reading a snapshot image: %w", err)
}

// imageFileOf opens the image file of the stored snapshot, under the
// store's lock, so that no Save deletes it first (an open file stays
// readable once deleted). It returns nil if the image is not in a file.
func (s *Store) imageFileOf() (vfs.File, error) {
	if s.snapFile == 0 {
		return nil, nil
	}
	f, err := s.fs.Open(s.imagePath(s.snapFile))
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot at index %d: its image file: %w", storage.ErrCorrupt, s.snapIndex, err)
	}
	return f, nil
}

// loadSnapFile sets snapFile from the stored snapshot's header. A header
// that fails its checksum is not Open's to report: the store opens, and
// reading the snapshot reports it, as for any damaged record; meanwhile
// no image file is deleted, since the one it names is not known.
func (s *Store) loadSnapFile() error {
	s.snapFile, s.snapFileUnknown = 0, false
	if !s.hasSnapshot {
		return nil
	}
	h, whole, err := readSnapshotRecord(s.db, s.codec, s.snapIndex)
	switch {
	case errors.Is(err, storage.ErrCorrupt):
		s.snapFileUnknown = true
		return nil
	case err != nil || whole != nil:
		return err
	}
	s.snapFile = h.File
	return nil
}
