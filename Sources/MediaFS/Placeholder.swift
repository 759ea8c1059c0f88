import MediaCache
