// Package toolsuite has no code of its own: its tests run real tools
// (git, go, npm, tar, python, sqlite3) and go-fuse's posixtest in a
// workspace of every transport (FUSE and overlay), each beside the same
// work on the native disk, and check the vault after each workspace
// closes: fsck, and the tree it holds equals the tree the workspace
// showed and the one left on the native disk.
package toolsuite
