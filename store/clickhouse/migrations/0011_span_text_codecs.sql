-- Version 11: fewer bytes and less server CPU for spans whose content is
-- mostly message text (issue 36).
--
-- On agent traffic that records its messages (scripts/throughput's agent
-- load, docs/throughput.md), the attribute JSON is three quarters of a
-- span's bytes on disk and the events JSON (exception stack traces) most
-- of the rest. Measured on 227k such spans (docs/bench-ingest.md):
-- ZSTD(2) with 4 MiB compression blocks stores attributes and events in
-- 376 B/span against 420 with ZSTD(1) and 1 MiB blocks (-10%), for about
-- the same server CPU per insert and 5-10% more per merge; ZSTD(3) saves
-- another 21 B/span for 25-40% more.
--
-- Parts below 256 MiB are Compact again (one data file instead of two per
-- column): with inserts of ~50k agent spans (~130 MiB), creating the
-- files of Wide parts was 15% of ClickHouse's CPU in the kernel (ext4's
-- inode allocator), and Compact inserts cut ClickHouse's CPU per span by
-- 10-20% for ~2% more bytes until merged. Merged parts above 256 MiB are
-- Wide, as before.
--
-- Existing parts keep their codec until merged; nothing is rewritten.

-- name: span text codecs and part format
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    MODIFY COLUMN attributes String CODEC(ZSTD(2)),
    MODIFY COLUMN events String CODEC(ZSTD(2)),
    MODIFY SETTING max_compress_block_size = 4194304, min_bytes_for_wide_part = 268435456;
