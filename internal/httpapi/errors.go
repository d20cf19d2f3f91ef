package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// NewID returns prefix-<16 random hex digits>: the id the server gives
// what it creates (tokens, jobs), unguessable so that one id tells
// nothing of another.
func NewID(prefix string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new id: %w", err)
	}
	return prefix + "-" + hex.EncodeToString(b[:]), nil
}

// Internal logs err to log and answers 500 without its detail: a
// store's or a database's words never reach the client.
func Internal(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	log.Error("api: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	WriteError(w, http.StatusInternalServerError, "internal", "", "internal error")
}

// StoreError answers err from the store: field errors 400, not found 404,
// conflicts 409, anything else 500. A store.RowError is shown in its own
// words (its field, else field); a bare ErrNotFound or ErrConflict may
// carry a database's text, so it is logged and answered with a message
// of ours that names field.
func StoreError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error, field string) {
	var fe *core.FieldError
	var re *store.RowError
	status, code := http.StatusConflict, "conflict"
	if errors.Is(err, store.ErrNotFound) {
		status, code = http.StatusNotFound, "not_found"
	}
	switch {
	case errors.As(err, &fe):
		WriteError(w, http.StatusBadRequest, "invalid_argument", fe.Field, err.Error())
	case errors.As(err, &re):
		if re.Field != "" {
			field = re.Field
		}
		WriteError(w, status, code, field, re.Msg)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		log.Warn("api: "+code, "method", r.Method, "path", r.URL.Path, "err", err)
		msg := "the request conflicts with what is stored"
		if status == http.StatusNotFound {
			msg = "the request refers to something that does not exist"
		}
		if field != "" {
			msg = field + ": " + msg[len("the request "):]
		}
		WriteError(w, status, code, field, msg)
	default:
		Internal(log, w, r, err)
	}
}
