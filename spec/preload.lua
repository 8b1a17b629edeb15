-- Loaded by busted once, before any spec file (.busted's helper): modules
-- that must live as long as the process.  busted insulates each spec file,
-- dropping from package.loaded what the file required; luv re-required in
-- the same process opens over the loop its first copy's finalizer closed,
-- and the next timer crashed the interpreter (uv_timer_init, SIGSEGV) when
-- a spec that loaded luv ran before spec/host/fabric/hub_spec.lua.
pcall(require, "luv")
