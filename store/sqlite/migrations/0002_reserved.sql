-- Reserved: version 2 is the trace summaries migration being written on
-- another branch; this placeholder keeps versions gap-free until that
-- branch and this one are merged (the merge replaces this file with it).
SELECT 1;
