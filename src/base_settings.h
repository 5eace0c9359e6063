/*-------------------------------------------------------------------------
 *
 * base_settings.h
 *		dlock's settings (dlock.*), defined in base_settings.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DLOCK_BASE_SETTINGS_H
#define DLOCK_BASE_SETTINGS_H

extern int	dlock_poll_interval_ms;
extern int	dlock_safety_wake_ms;
extern int	dlock_debug_queue_delay_ms;
extern int	dlock_debug_sweep_every;
extern int	dlock_idle_key_lifetime_s;
extern bool dlock_handoff_yield;

extern void dlock_settings_define(void);

/* the WARNING of a backend that finds dlock not preloaded */
extern void dlock_warn_not_preloaded(void);

#endif							/* DLOCK_BASE_SETTINGS_H */
