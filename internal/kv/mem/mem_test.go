package mem_test

import (
	"testing"

	"github.com/agentvfs/agentvfs/internal/kv"
	"github.com/agentvfs/agentvfs/internal/kv/kvtest"
	"github.com/agentvfs/agentvfs/internal/kv/mem"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Engine { return mem.New() })
}
