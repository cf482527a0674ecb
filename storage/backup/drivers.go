package backup

// The blob stores a server can back up to, by URL scheme.
import (
	_ "gocloud.dev/blob/azureblob" // azblob://container
	_ "gocloud.dev/blob/fileblob"  // file:///path
	_ "gocloud.dev/blob/gcsblob"   // gs://bucket
	_ "gocloud.dev/blob/memblob"   // mem:// (tests)
	_ "gocloud.dev/blob/s3blob"    // s3://bucket?region=...
)
