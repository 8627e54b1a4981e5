package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CacheTTLDefault is Pipeline.CacheTTL's default: 30 days, long enough
// that re-running last week's file or requeueing last month's batch costs
// nothing for what was answered, short enough that a model the vendor
// updates behind the same name is asked again within a month.
const CacheTTLDefault = 30 * 24 * time.Hour

// cacheOptions reads the pipeline's cache settings from the file.
func (rp rawPipeline) cacheOptions(p *Pipeline) error {
	p.Cache = rp.Cache
	d, err := parseTTL(rp.CacheTTL)
	if err != nil {
		return fmt.Errorf("cache_ttl %q: %w", rp.CacheTTL, err)
	}
	if rp.CacheTTL != "" && d <= 0 {
		return fmt.Errorf("cache_ttl %q must be positive (leave it out for the default %s, or set cache = false)", rp.CacheTTL, CacheTTLDefault)
	}
	p.CacheTTL = d
	return nil
}

// parseTTL is parseDuration that also takes whole days ("30d"), the unit a
// cache lifetime is thought in.
func parseTTL(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, errDurationForm
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return parseDuration(s)
}

func (p *Pipeline) cacheDefaults() {
	if p.CacheTTL == 0 {
		p.CacheTTL = CacheTTLDefault
	}
}

func (p *Pipeline) validateCache(v *validator, at string) {
	if p.CacheTTL <= 0 {
		v.addf(at, "cache_ttl must be positive, got %s", p.CacheTTL)
	}
}
