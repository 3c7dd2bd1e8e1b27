package fusefs

import "github.com/hanwen/go-fuse/v2/fs"

// Every go-fuse interface the node implements. A method whose signature
// drifts from go-fuse's fails to compile here instead of being silently
// ignored by the bridge.
var (
	_ = (fs.InodeEmbedder)((*node)(nil))
	_ = (fs.NodeLookuper)((*node)(nil))
	_ = (fs.NodeGetattrer)((*node)(nil))
	_ = (fs.NodeSetattrer)((*node)(nil))
	_ = (fs.NodeReaddirer)((*node)(nil))
	_ = (fs.NodeOpendirHandler)((*node)(nil))
	_ = (fs.FileReaddirenter)((*dirHandle)(nil))
	_ = (fs.FileSeekdirer)((*dirHandle)(nil))
	_ = (fs.FileReleasedirer)((*dirHandle)(nil))
	_ = (fs.NodeReadlinker)((*node)(nil))
	_ = (fs.NodeStatfser)((*node)(nil))
	_ = (fs.NodeMkdirer)((*node)(nil))
	_ = (fs.NodeMknoder)((*node)(nil))
	_ = (fs.NodeSymlinker)((*node)(nil))
	_ = (fs.NodeCreater)((*node)(nil))
	_ = (fs.NodeLinker)((*node)(nil))
	_ = (fs.NodeUnlinker)((*node)(nil))
	_ = (fs.NodeRmdirer)((*node)(nil))
	_ = (fs.NodeRenamer)((*node)(nil))
	_ = (fs.NodeOpener)((*node)(nil))
	_ = (fs.NodeFlusher)((*node)(nil))
	_ = (fs.NodeReader)((*node)(nil))
	_ = (fs.NodeWriter)((*node)(nil))
	_ = (fs.NodeFsyncer)((*node)(nil))
	_ = (fs.NodeAllocater)((*node)(nil))
	_ = (fs.NodeLseeker)((*node)(nil))
	_ = (fs.NodeCopyFileRanger)((*node)(nil))
	_ = (fs.NodeGetxattrer)((*node)(nil))
	_ = (fs.NodeSetxattrer)((*node)(nil))
	_ = (fs.NodeRemovexattrer)((*node)(nil))
	_ = (fs.NodeListxattrer)((*node)(nil))
)
