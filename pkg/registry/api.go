package registry

import (
	"github.com/skillbus/skillbus/events/registryapi"
)

// The service's wire contract is package registryapi; these names are kept for
// the registry's own code and its callers.
const (
	ServiceName      = registryapi.ServiceName
	ServiceVersion   = registryapi.ServiceVersion
	EndpointList     = registryapi.EndpointList
	EndpointGet      = registryapi.EndpointGet
	EndpointSearch   = registryapi.EndpointSearch
	EndpointValidate = registryapi.EndpointValidate
	EndpointRepair   = registryapi.EndpointRepair
	StateOK          = registryapi.StateOK
	StateInvalid     = registryapi.StateInvalid
)

// Request and response bodies (see package registryapi).
type (
	SkillInfo        = registryapi.SkillInfo
	ListRequest      = registryapi.ListRequest
	ListResponse     = registryapi.ListResponse
	GetRequest       = registryapi.GetRequest
	GetResponse      = registryapi.GetResponse
	VersionInfo      = registryapi.VersionInfo
	SearchRequest    = registryapi.SearchRequest
	SearchResponse   = registryapi.SearchResponse
	SearchResult     = registryapi.SearchResult
	ValidateRequest  = registryapi.ValidateRequest
	ValidateResponse = registryapi.ValidateResponse
	ErrorResponse    = registryapi.ErrorResponse
	RepairRequest    = registryapi.RepairRequest
	RepairResponse   = registryapi.RepairResponse
)
