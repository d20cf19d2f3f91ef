package pricing

import (
	"errors"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ParseError is an error in a catalog file; see core.ParseError.
type ParseError = core.ParseError

// ErrUnknownOffer is wrapped by the error (*Catalog).Offer returns for an id
// the catalog does not have.
var ErrUnknownOffer = errors.New("unknown offer")
