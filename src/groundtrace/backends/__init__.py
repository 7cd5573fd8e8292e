"""The heavy things metrics call (embedders, judge clients), each imported only when first used so
that ``import groundtrace`` stays fast."""
