-- Reserved for the vault of issue 47 (built beside the leak records of
-- 0028): the merge replaces this file with the vault's own migration.
SELECT 1;
