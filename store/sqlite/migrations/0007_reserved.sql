-- Version 7 is reserved for the trace-window work of issue 36 (another
-- branch). This file only holds the number so that version 8 follows
-- without a gap on this branch; it changes nothing, and is dropped when
-- the branches merge.
SELECT 1;
