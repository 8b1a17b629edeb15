-- A busted output handler: busted's utfTerminal output, and the time each
-- spec file took (and each case over 5 s) appended to the file
-- $BUSTED_TIMES names, so tools/run-tests can show where make test's time goes.
--   BUSTED_TIMES=.cache/times.log busted -o spec/timed_output.lua ...
return function(options)
  local busted = require "busted"
  local socket = require "socket"
  local terminal = require("busted.outputHandlers.utfTerminal")(options)
  local path = os.getenv("BUSTED_TIMES")
  local out = path and io.open(path, "a")
  local file_start, test_start = {}, {}
  local function note(fmt, ...)
    if out then out:write(string.format(fmt, ...)); out:flush() end
  end
  local subscribe = terminal.subscribe
  terminal.subscribe = function(self, opts)
    subscribe(self, opts)
    busted.subscribe({ "file", "start" }, function(file)
      file_start[file.name] = socket.gettime()
      return nil, true
    end)
    busted.subscribe({ "file", "end" }, function(file)
      local t0 = file_start[file.name]
      if t0 then note("%7.1f s  %s\n", socket.gettime() - t0, file.name) end
      return nil, true
    end)
    busted.subscribe({ "test", "start" }, function(element)
      test_start[element] = socket.gettime()
      return nil, true
    end)
    busted.subscribe({ "test", "end" }, function(element)
      local t0 = test_start[element]
      if t0 and socket.gettime() - t0 > 5 then
        note("%7.1f s    case: %s\n", socket.gettime() - t0, element.name)
      end
      test_start[element] = nil
      return nil, true
    end)
  end
  return terminal
end
